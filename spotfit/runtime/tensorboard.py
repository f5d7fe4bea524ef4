"""TensorBoard: scalars (and histograms when asked) under the job's prefix, and serving them.

Runtime side (`TensorBoardLog`, TensorFlow imported lazily): the chief writes, under
`<job prefix>/tensorboard/`, the Keras layout: `train/` and `validation/` runs with
`epoch_<metric>` scalars at each epoch end (step = epoch number), `batch_loss` every
`BATCH_EVERY` global steps, and, with `training.histogram_freq: N`, a histogram of every
weight every N epochs. On a `file://` store the event files are written in place; on other
stores they are written to a local folder and uploaded after each epoch and at each
checkpoint, so a preempted attempt loses at most the scalars since its last save. Every
attempt adds its own event files; TensorBoard merges them, and the steps continue across
attempts because resume is exact.

Controller side (no TensorFlow): `serve(job_url, job_id, port)` runs `tensorboard` on
127.0.0.1 over the job's logs, downloading them first (and again every `REFRESH_S`) when the
store is not a local folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spotfit.errors import SpotfitError, StoreError

PREFIX = "tensorboard"
BATCH_EVERY = 10
REFRESH_S = 15.0


def local_folder(job_url: str) -> Path | None:
    """The job's TensorBoard folder when the store is a local folder (`file://`), else None."""
    if job_url.startswith("file://"):
        return Path(job_url[len("file://"):]) / PREFIX
    return None


class TensorBoardLog:
    """Writes one attempt's TensorBoard logs."""

    def __init__(self, store, histogram_freq: int = 0):
        import tensorflow as tf

        self._tf = tf
        self.store = store
        self.histogram_freq = histogram_freq
        folder = local_folder(store.url)
        self._remote = folder is None
        self.folder = folder or Path(tempfile.mkdtemp(prefix="spotfit-tb-"))
        self._writers = {run: tf.summary.create_file_writer(str(self.folder / run)) for run in ("train", "validation")}
        self._uploaded: dict[str, int] = {}

    def on_batch_end(self, step: int, loss: float | None) -> None:
        if loss is not None and step % BATCH_EVERY == 0:
            with self._writers["train"].as_default():
                self._tf.summary.scalar("batch_loss", loss, step=step)

    def on_epoch_end(self, epoch: int, logs: dict, model) -> None:
        """`epoch` is 1-based (epochs completed)."""
        tf = self._tf
        for name, value in logs.items():
            if value is None:
                continue
            run, tag = ("validation", name[4:]) if name.startswith("val_") else ("train", name)
            with self._writers[run].as_default():
                tf.summary.scalar(f"epoch_{tag}", value, step=epoch)
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            with self._writers["train"].as_default():
                for weight in model.weights:
                    tf.summary.histogram(weight.path.replace(":", "_"), weight.value, step=epoch)
        self.flush()

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()
        if self._remote:
            self._upload()

    def _upload(self) -> None:
        for path in self.folder.rglob("*"):
            if not path.is_file():
                continue
            key = f"{PREFIX}/{path.relative_to(self.folder).as_posix()}"
            size = path.stat().st_size
            if self._uploaded.get(key) != size:
                try:
                    self.store.put_file(str(path), key)
                except StoreError:  # store unreachable: training goes on, the next flush uploads
                    return
                self._uploaded[key] = size


# -- serving (controller side) ----------------------------------------------------------------


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
    logdir = local_folder(job_url)
    remote = logdir is None
    if remote:
        logdir = cache / job_id
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
