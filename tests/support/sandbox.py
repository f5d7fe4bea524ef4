"""What every emulated cloud of the tests shares: a VM that runs its real boot script in a sandbox folder.

The AWS harness (tests/support/emulated_instance.py) and the GCP one (tests/support/emulated_gce.py)
differ in their APIs and metadata servers; the machine they boot is the same:

- `prepare` makes the VM's folder (`bin/`, `home/`) and `boot` runs its boot script there with
  bash, in a session of its own: `HOME`, `PATH` and the install root (`SPOTFIT_ROOT`) redirected, no
  `PYTHONPATH` (the VM imports only the spotfit wheel it installed), pip reading only a local
  wheel folder (`PIP_NO_INDEX`, `PIP_FIND_LINKS`: nothing is downloaded). On its `PATH`,
  stand-ins for the image: `python3`/`python3.11` (the test venv's interpreter, whose
  TensorFlow plays the image's framework; a venv made with `--system-site-packages` gets the
  test venv's site-packages as its "system" packages, since a venv made from a venv would not
  see them), `shutdown` (records the call) and the cloud's own tools (its CLI);
- `Machine` reads a VM's boot log and whether it powered off; `kill` ends a VM's processes;
- `Harness` is a cloud's watcher thread (its `_tick` every `TICK_S`, a failure kept in `errors`
  for the test), its timers (a notice's end), the wheel folder with the `PROBE` package, and
  the controller it drives a job with (`start_controller`, `wait_controller`);
- `assert_runs_shipped_wheel`: a VM's venv holds the wheel the controller shipped (this
  checkout's runtime) and the job's `PROBE` requirement.
"""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import sysconfig
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

PROBE = "spotfit-emulated-probe"  # a package only the local wheel folder has: environment.pip installs it
# How often the emulated cloud looks at its API and the controller polls it. Each look is an HTTP
# call to the emulator (moto's EC2, the emulated GCE): at 0.1 s the two took about 9 s more CPU in
# the emulated AWS interruption than at 0.3 s (62 against 53 s, the test's whole CPU, one run
# each); the controller's own default is 1 s. Tests wait on states, so only latency changes.
TICK_S = 0.3

_PYTHON_STUB = """#!/bin/bash
# Stands in for the image's Python 3.11 and its framework: the test venv's interpreter.
if [ "${{1:-}}" = "-m" ] && [ "${{2:-}}" = "venv" ]; then
  {python} "$@" || exit $?
  for venv in "$@"; do :; done
  echo {site} > "$venv/lib/python3.11/site-packages/_emulated_image_framework.pth"
  exit 0
fi
exec {python} "$@"
"""

_SHUTDOWN_STUB = """#!/bin/bash
echo "$*" > {marker}
"""


class Machine:
    """A booted VM's sandbox (`folder`), for a dataclass that has one."""

    folder: Path

    @property
    def boot_log(self) -> str:
        path = self.folder / "opt" / "spotfit" / "boot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @property
    def powered_off(self) -> bool:
        return (self.folder / "shutdown-called").exists()


def prepare(folder: Path, tools: dict[str, str]) -> Path:
    """Make the sandbox in `folder`; returns its `bin/`, where the image's stand-ins and `tools` are.

    `tools`: the cloud's own stand-ins on `PATH` ({name: script text}).
    """
    bin_dir, home = folder / "bin", folder / "home"
    for d in (bin_dir, home):
        d.mkdir(parents=True)
    site = sysconfig.get_paths()["purelib"]
    stubs = {"python3": _PYTHON_STUB.format(python=sys.executable, site=site),
             "python3.11": _PYTHON_STUB.format(python=sys.executable, site=site),
             "shutdown": _SHUTDOWN_STUB.format(marker=folder / "shutdown-called"), **tools}
    for name, text in stubs.items():
        _script(bin_dir / name, text)
    return bin_dir


def boot(folder: Path, script_name: str, script: bytes, env: dict[str, str], wheels: Path) -> subprocess.Popen:
    """Run `script` (saved in the prepared `folder` as `script_name`) with bash, in a session of its own.

    `env`: the cloud's own variables (its metadata URL, its store's endpoint), over the sandbox's.
    """
    path = folder / script_name
    path.write_bytes(script)
    home = folder / "home"
    sandbox = {"PATH": f"{folder / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
               "SPOTFIT_ROOT": str(folder / "opt" / "spotfit"), "SPOTFIT_HOME": str(home / ".spotfit"),
               "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
               "TF_CPP_MIN_LOG_LEVEL": "2"}
    with open(folder / "console.log", "wb") as console:
        return subprocess.Popen(["bash", str(path)], cwd=home, env={**sandbox, **env}, stdin=subprocess.DEVNULL,
                                stdout=console, stderr=subprocess.STDOUT, start_new_session=True)


class Harness:
    """A cloud's watcher thread and timers, for a dataclass with `folder` and `errors` (see the module doc)."""

    folder: Path
    errors: list[str]

    def _tick(self) -> None:
        raise NotImplementedError

    def backend(self) -> Any:
        raise NotImplementedError

    def start_controller(self, job_id: str) -> threading.Thread:
        """The controller of `job_id` on this cloud's backend, running in a thread of its own."""
        from spotfit import sdk
        from spotfit.controller.loop import Controller

        def drive() -> None:  # SQLite connections stay in the thread that made them
            Controller(sdk.db(), job_id, backend=self.backend(), poll_s=TICK_S).run()

        loop = threading.Thread(target=drive, daemon=True)
        loop.start()
        return loop

    def wait_controller(self, loop: threading.Thread, job_id: str, timeout_s: float = 600) -> None:
        """Wait for the controller to drive the job to its end; the harness itself must not have failed."""
        from tests.support.wait import wait_for

        wait_for(lambda: not loop.is_alive() or self.errors, timeout_s,
                 f"the controller to drive job {job_id} to its end")
        assert not self.errors, self.errors

    def _start_harness(self) -> None:
        self.wheels = self.folder / "wheels"
        self.wheels.mkdir(parents=True, exist_ok=True)
        _probe_wheel(self.wheels)
        self._stop = threading.Event()
        self._timers: list[threading.Timer] = []
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _later(self, delay_s: float, call: Callable[..., Any], *args: Any) -> None:
        """`call(*args)` in `delay_s` (cancelled by `_stop_harness`)."""
        timer = threading.Timer(delay_s, call, args=args)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _stop_harness(self) -> None:
        self._stop.set()
        self._watcher.join(timeout=10)
        for timer in self._timers:
            timer.cancel()

    def _watch(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self._tick()
            except Exception as exc:  # noqa: BLE001 - a harness failure must reach the test, not vanish
                self.errors.append(f"{type(exc).__name__}: {exc}")


def assert_runs_shipped_wheel(machine: Machine) -> None:
    """`machine`'s venv has the wheel the controller shipped (this checkout's runtime) and the `PROBE` package."""
    from spotfit.backends.wheel import running_wheel
    from spotfit.runtime import main

    site = machine.folder / "opt" / "spotfit" / "venv" / "lib" / "python3.11" / "site-packages"
    version = running_wheel().filename.split("-")[1]  # 0.1.0+g<hash of this checkout's package>
    assert (site / f"spotfit-{version}.dist-info").is_dir() and (site / PROBE.replace("-", "_")).is_dir()
    assert (site / "spotfit" / "runtime" / "main.py").read_bytes() == Path(main.__file__).read_bytes()


def kill(proc: subprocess.Popen) -> None:
    """Kill a VM's processes: its bash and every descendant (the runtime has a group of its own)."""
    if proc.poll() is not None:
        return
    try:
        tree = [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]
    except psutil.NoSuchProcess:
        tree = []
    for p in tree:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=30)


def _probe_wheel(folder: Path) -> None:
    """A one-module wheel that only this folder has, for `environment.pip` to install."""
    name = PROBE.replace("-", "_")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "VALUE = 'probe'\n")
        zf.writestr(f"{name}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {PROBE}\nVersion: 1.0\n")
        zf.writestr(f"{name}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{name}-1.0.dist-info/RECORD", "")
    (folder / f"{name}-1.0-py3-none-any.whl").write_bytes(buf.getvalue())


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)
