"""A job's TensorBoard logs seen from the controller: where they are, fetching and serving them.

The runtime writes them (runtime/tensorboard.py: the `TensorBoardLogger` callback) under
`<job prefix>/tensorboard/`. `serve(job_url, job_id, port, cache)` runs `tensorboard` on
127.0.0.1 over them, downloading them first (and again every `REFRESH_S`) when the store is not
a local folder. This module never imports TensorFlow: `spotfit tensorboard` starts TensorBoard
in a process of its own.

>>> local_folder("file:///srv/spotfit/jobs/j1").as_posix(), local_folder("s3://bucket/jobs/j1")
('/srv/spotfit/jobs/j1/tensorboard', None)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from spotfit.errors import SpotfitError

PREFIX = "tensorboard"
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


def serve(job_url: str, job_id: str, port: int, cache: Path, on_start=None) -> int:
    """Serve the job's logs on 127.0.0.1:`port` until interrupted; returns TensorBoard's exit code."""
    try:
        import tensorboard  # noqa: F401  (only to fail early with a hint)
    except ImportError:
        raise SpotfitError("TensorBoard is not installed in this environment.",
                           hint="Install the runtime extra: pip install 'spotfit[tf-cpu]' (or tf-gpu).") from None
    local = local_folder(job_url)
    remote = local is None
    logdir = cache / job_id if local is None else local
    if remote:
        logdir.mkdir(parents=True, exist_ok=True)
        fetch(job_url, logdir)
    elif not logdir.exists():
        raise SpotfitError(f"Job {job_id} has no TensorBoard logs yet (looked in {logdir}).",
                           hint="Logs appear after the first epoch of training; try again then.")
    proc = subprocess.Popen(command(logdir, port), stdin=subprocess.DEVNULL,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    stop = {"now": False}

    def _stop(signum, frame):
        stop["now"] = True

    previous = signal.signal(signal.SIGTERM, _stop)
    if on_start:
        on_start(f"http://127.0.0.1:{port}/", logdir)
    try:
        last = time.monotonic()
        while proc.poll() is None and not stop["now"]:
            time.sleep(0.2)
            if remote and time.monotonic() - last >= REFRESH_S:
                fetch(job_url, logdir)
                last = time.monotonic()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return 0 if stop["now"] or proc.returncode in (0, -signal.SIGTERM) else proc.returncode
