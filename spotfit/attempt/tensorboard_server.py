"""A job's TensorBoard logs seen from the controller: where they are, fetching and serving them.

The runtime writes them (runtime/tensorboard.py: the `TensorBoardLogger` callback) under
`<job prefix>/tensorboard/`. `serve(job_url, job_id, port, cache)` runs `tensorboard` on
127.0.0.1 over them, downloading them first (and again every `REFRESH_S`) when the store is not
a local folder. This module never imports TensorFlow: `spotfit tensorboard` starts TensorBoard
in a process of its own. The dashboard's TensorBoard (`spotfit.ui.tensorboard_socket`) uses the
same `logdir_for` and `follow`, on a Unix socket that only the dashboard's user can open.

>>> local_folder("file:///srv/spotfit/jobs/j1").as_posix(), local_folder("s3://bucket/jobs/j1")
('/srv/spotfit/jobs/j1/tensorboard', None)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from spotfit.attempt import layout
from spotfit.errors import SpotfitError

PREFIX = layout.TENSORBOARD
REFRESH_S = 15.0


def local_folder(job_url: str) -> Path | None:
    """The job's TensorBoard folder when the store is a local folder (`file://`), else None."""
    if job_url.startswith("file://"):
        return Path(job_url[len("file://"):]) / PREFIX
    return None


def fetch(job_url: str, dest: Path) -> int:
    """Download the job's TensorBoard files into `dest`; returns how many changed."""
    from spotfit.stores import open_store

    store = open_store(job_url)
    changed = 0
    for info in store.list_info(PREFIX):
        target = dest / info.key[len(PREFIX) + 1:]
        if target.exists() and target.stat().st_size == info.size:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        store.get_file(info.key, str(target))
        changed += 1
    return changed


def command(logdir: Path, port: int, host: str = "127.0.0.1") -> list[str]:
    """The TensorBoard command line (the rust data server is off: one process, local only)."""
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", host,
            "--port", str(port), "--load_fast", "false", "--reload_interval", "5"]


def logdir_for(job_url: str, job_id: str, cache: Path) -> Path:
    """The folder TensorBoard reads: the store's own for `file://`, else `cache/job_id`, fetched now."""
    local = local_folder(job_url)
    if local is None:
        logdir = cache / job_id
        logdir.mkdir(parents=True, exist_ok=True)
        fetch(job_url, logdir)
        return logdir
    if not local.exists():
        raise SpotfitError(f"Job {job_id} has no TensorBoard logs yet (looked in {local}).",
                           hint="Logs appear after the first epoch of training; try again then.")
    return local


def require_tensorboard() -> None:
    """Fail early, with the install hint, where TensorBoard is not installed."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise SpotfitError("TensorBoard is not installed in this environment.",
                           hint="Install the runtime extra: pip install 'spotfit[tf-cpu]' (or tf-gpu).") from None


def follow(job_url: str, logdir: Path, running: Callable[[], bool]) -> bool:
    """Fetch a remote store's logs into `logdir` every `REFRESH_S` while `running()`, until SIGTERM or
    Ctrl-C; True when SIGTERM ended it."""
    stop = {"now": False}

    def _stop(signum: int, frame: object) -> None:
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, _stop)
    remote = local_folder(job_url) is None
    try:
        last = time.monotonic()
        while running() and not stop["now"]:
            time.sleep(0.2)
            if remote and time.monotonic() - last >= REFRESH_S:
                fetch(job_url, logdir)
                last = time.monotonic()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return stop["now"]


def serve(job_url: str, job_id: str, port: int, cache: Path,
          on_start: Callable[[str, Path], None] | None = None) -> int:
    """Serve the job's logs on 127.0.0.1:`port` until interrupted; returns TensorBoard's exit code."""
    require_tensorboard()
    logdir = logdir_for(job_url, job_id, cache)
    proc = subprocess.Popen(command(logdir, port), stdin=subprocess.DEVNULL,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if on_start:
        on_start(f"http://127.0.0.1:{port}/", logdir)
    stopped = False
    try:
        stopped = follow(job_url, logdir, lambda: proc.poll() is None)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return 0 if stopped or proc.returncode in (0, -signal.SIGTERM) else proc.returncode
