"""The local backend: each attempt is a child process in its own process group.

It runs `python -m spotfit.runtime JOB_URL N` with the same interpreter, so a laptop can run
the whole system. Preemptions are real signals to the process group: SIGTERM, then SIGKILL
after the notice. Handles (`LocalHandle`, in local_process.py) carry the pid and the process
start time, so that a controller that restarts can find (adopt) a still-running attempt and
never confuse it with a reused pid. A controller that died inside `launch`, before it stored
the handle, is covered too: `find` recognizes the attempt's processes by their command line.

With `resources.workers` > 1 an attempt is a group of worker processes, one per worker, each
with a `TF_CONFIG` naming all of them on free 127.0.0.1 ports (worker 0 is the chief; its log
is the attempt's, the others log to `attempt-NNNN-wI.log`). The group has one handle; a
preemption signals every worker; the group's exit code is the chief's unless a worker failed.
Synchronous training cannot go on without a worker, so when one worker fails the others are
killed, and when one ends normally the others get `GROUP_GRACE_S` to end too.

With `resources.accelerator: CPU` and `count` N > 1, each process sees this CPU as N logical
devices (`SPOTFIT_LOGICAL_CPUS`): N replicas under MirroredStrategy, as N GPUs would give.

Logs are written straight into a `file://` job store; with any other store they are written
under `$SPOTFIT_HOME/logs/<job>/` and copied to the store when `stop` ends the attempt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path, PurePosixPath

from spotfit.attempt import layout
from spotfit.attempt.config import LOGICAL_CPUS_ENV
from spotfit.attempt.exit_codes import EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.backends.base import AttemptStatus, BackendTraits, LaunchOptions, LaunchRequest
from spotfit.backends.local_process import LocalHandle, LocalProcess, find_runtime, runtime_command
from spotfit.errors import SpotfitError
from spotfit.host.home import home

_ENDED_OK = (EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED)
GROUP_GRACE_S = 60.0


class LocalBackend(BackendTraits):
    """Run attempts as local processes."""

    name = "local"
    runs_here = True

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._first_exit: dict[int, float] = {}  # group (chief pid) -> when a worker ended
        self._log_uploads: dict[int, tuple[str, str]] = {}  # pid -> (job URL, key) of a log kept outside the store

    def shell_command(self, handle: LocalHandle, options: LaunchOptions, command: list[str]) -> list[str]:
        """`command`, or a login shell when empty: the CLI starts it in the attempt's folder."""
        return command or [os.environ.get("SHELL") or "/bin/sh"]

    def port_forward_command(self, handle: LocalHandle, options: LaunchOptions, local: int, remote: int) -> None:
        """None: the attempt listens on this machine, and spotfit relays the port itself."""
        return None

    def launch(self, request: LaunchRequest) -> LocalHandle:
        if request.workers <= 1:
            handle = LocalHandle((self._launch_one(request, _log_path(request), {}),))
        else:
            ports = _free_ports(request.workers)
            handle = LocalHandle(tuple(self._launch_one(request, _worker_log(request, index),
                                                        {"TF_CONFIG": _tf_config(ports, index)})
                                       for index in range(request.workers)))
        if not request.job_url.startswith("file://"):  # the logs are written here: copied to the store at the end
            key = request.log_key or layout.log(request.attempt)
            for index, member in enumerate(handle.processes):
                self._log_uploads[member.pid] = (request.job_url, _worker_key(key, index))
        return handle

    def load_handle(self, text: str) -> LocalHandle:
        return LocalHandle.from_json(text)

    def find(self, request: LaunchRequest) -> LocalHandle | None:
        """The live processes of `request`'s attempt, whoever launched them.

        A group with a worker missing (the launch died halfway) cannot train, synchronous as it
        is: its workers are killed and None is returned, as for an attempt never launched.
        """
        found = find_runtime(request.job_url, request.attempt)
        workers = max(request.workers, 1)
        if len(found) < workers:
            for member in found.values():
                member.signal_group(signal.SIGKILL)
            return None
        return LocalHandle(tuple(replace(found[i], log=str(_worker_log(request, i))) for i in range(workers)))

    def _launch_one(self, request: LaunchRequest, log_path: Path, extra_env: dict[str, str]) -> LocalProcess:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **_devices(request), **request.env, **extra_env, "PYTHONUNBUFFERED": "1"}
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                runtime_command(self.python, request.job_url, request.attempt),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: signals reach all of it
            )
        self._children[proc.pid] = proc
        return LocalProcess.of(proc.pid, log=str(log_path))

    def status(self, handle: LocalHandle) -> AttemptStatus:
        if len(handle.processes) == 1:
            return self._status_one(handle.chief)
        statuses = [self._status_one(m) for m in handle.processes]
        if all(s.running for s in statuses):
            return AttemptStatus(running=True)
        if not any(s.running for s in statuses):
            self._first_exit.pop(handle.chief.pid, None)
            return _group_exit(statuses)
        failed = any(not s.running and (s.signal or (s.exit_code is not None and s.exit_code not in _ENDED_OK))
                     for s in statuses)
        first = self._first_exit.setdefault(handle.chief.pid, time.monotonic())
        if failed or time.monotonic() - first > GROUP_GRACE_S:
            for member, st in zip(handle.processes, statuses, strict=True):
                if st.running:
                    member.signal_group(signal.SIGKILL)
        return AttemptStatus(running=True)

    def _status_one(self, member: LocalProcess) -> AttemptStatus:
        child = self._children.get(member.pid)
        if child is not None:
            code = child.poll()
            if code is None:
                return AttemptStatus(running=True)
            if code < 0:
                return AttemptStatus(running=False, exit_code=None, signal=-code)
            return AttemptStatus(running=False, exit_code=code)
        if member.alive():
            return AttemptStatus(running=True)
        return AttemptStatus(running=False)  # adopted and gone: the exit went unobserved

    def preempt(self, handle: LocalHandle, notice_s: float) -> None:
        if notice_s <= 0:
            _signal_all(handle, signal.SIGKILL)
            return
        _signal_all(handle, signal.SIGTERM)
        timer = threading.Timer(notice_s, _signal_all, args=(handle, signal.SIGKILL))
        timer.daemon = True
        timer.start()

    def stop(self, handle: LocalHandle, grace_s: float = 10.0) -> None:
        _signal_all(handle, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.status(handle).running:
            time.sleep(0.05)
        if self.status(handle).running:
            _signal_all(handle, signal.SIGKILL)
        for member in handle.processes:
            child = self._children.get(member.pid)
            if child is not None:
                child.wait()
        self._upload_logs(handle)

    def _upload_logs(self, handle: LocalHandle) -> None:
        """Copy an ended attempt's logs to its store (`spotfit logs` reads them there, else here)."""
        from spotfit.stores import open_store

        for member in handle.processes:
            target = self._log_uploads.pop(member.pid, None)
            if target is None or not member.log or not Path(member.log).is_file():
                continue
            job_url, key = target
            try:
                open_store(job_url).write_bytes(key, Path(member.log).read_bytes())
            except (SpotfitError, OSError):  # the store is down: the copy under $SPOTFIT_HOME/logs stays readable
                continue


def _log_path(request: LaunchRequest) -> Path:
    """Logs go straight into a file:// store; elsewhere under $SPOTFIT_HOME/logs, copied to the store at the end."""
    key = request.log_key or layout.log(request.attempt)
    if request.job_url.startswith("file://"):
        return Path(request.job_url[len("file://"):]) / key
    return home() / "logs" / request.job_id / key


def _worker_key(key: str, index: int) -> str:
    """Worker 0 logs under `key`; worker i under `<stem>-wI<suffix>` beside it, as `_worker_log` names it."""
    path = PurePosixPath(key)
    return str(path.with_name(f"{path.stem}-w{index}{path.suffix}")) if index else key


def _worker_log(request: LaunchRequest, index: int) -> Path:
    """Worker 0 logs to the attempt's log; worker i to `attempt-NNNN-wI.log` beside it."""
    path = _log_path(request)
    return path.with_name(f"{path.stem}-w{index}{path.suffix}") if index else path


def _signal_all(handle: LocalHandle, sig: int) -> None:
    for member in handle.processes:
        member.signal_group(sig)


def _group_exit(statuses: list[AttemptStatus]) -> AttemptStatus:
    """A finished group's outcome: the chief's code, unless a worker failed or was killed."""
    chief = statuses[0]
    failed = [s.exit_code for s in statuses if s.exit_code is not None and s.exit_code not in _ENDED_OK]
    if failed:
        return AttemptStatus(running=False, exit_code=failed[0])
    if chief.exit_code in _ENDED_OK:
        return AttemptStatus(running=False, exit_code=chief.exit_code)
    signals = [s.signal for s in statuses if s.signal]
    if signals:
        return AttemptStatus(running=False, exit_code=None, signal=signals[0])
    return AttemptStatus(running=False)


def _devices(request: LaunchRequest) -> dict[str, str]:
    """`accelerator: CPU` with `count` N > 1: this CPU as N logical devices, so the attempt trains N replicas
    (the spec's `env:` may still set SPOTFIT_LOGICAL_CPUS itself)."""
    if request.accelerator.upper() == "CPU" and request.accelerator_count > 1:
        return {LOGICAL_CPUS_ENV: str(request.accelerator_count)}
    return {}


def _free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    import socket

    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tf_config(ports: list[int], index: int) -> str:
    """The `TF_CONFIG` of worker `index` (runtime/strategy.py reads it)."""
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})
