"""TensorBoard logging inside an attempt: the `TensorBoardLogger` Keras callback.

The chief writes, under `<job prefix>/tensorboard/`, the Keras layout: `train/` and
`validation/` runs with `epoch_<metric>` scalars at each epoch end (step = epoch number),
`batch_loss` every `BATCH_EVERY` global steps, and, with `training.histogram_freq: N`, a
histogram of every weight every N epochs. On a `file://` store the event files are written in
place; on other stores they are written to a local folder and uploaded after each epoch and at
each checkpoint (the main callback calls `TensorBoardLog.flush` after every save), so a
preempted attempt loses at most the scalars since its last save. Every attempt adds its own
event files; TensorBoard merges them, and the steps continue across attempts because resume is
exact.

`TensorBoardLog` holds one attempt's writers; each `fit` call gets a `TensorBoardLogger` over
it, placed before the main callback so that a step's scalar is written before that step's
checkpoint (the main callback may end training at that step). Serving the logs is controller
side: spotfit/tensorboard_server.py.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import keras
import tensorflow as tf

from spotfit.errors import StoreError
from spotfit.tensorboard_server import PREFIX, local_folder

BATCH_EVERY = 10


class TensorBoardLog:
    """One attempt's TensorBoard event files: the writers, flushing and uploading them."""

    def __init__(self, store, histogram_freq: int = 0):
        self.store = store
        self.histogram_freq = histogram_freq
        folder = local_folder(store.url)
        self._remote = folder is None
        self.folder = folder or Path(tempfile.mkdtemp(prefix="spotfit-tb-"))
        self.writers = {run: tf.summary.create_file_writer(str(self.folder / run)) for run in ("train", "validation")}
        self._uploaded: dict[str, int] = {}

    def flush(self) -> None:
        for writer in self.writers.values():
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


class TensorBoardLogger(keras.callbacks.Callback):
    """Writes one `fit` call's scalars (and histograms) into the attempt's `TensorBoardLog`.

    `resume_step`: the global step this call resumes at, or None to start at the optimizer's
    step counter (the main callback counts steps the same way).
    """

    def __init__(self, log: TensorBoardLog, resume_step: int | None = None):
        super().__init__()
        self.log = log
        self.resume_step = resume_step
        self.step = 0

    def on_train_begin(self, logs=None):
        if self.resume_step is not None:
            self.step = self.resume_step
        else:
            self.step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_batch_end(self, batch, logs=None):
        self.step += self.model.steps_per_execution
        loss = _finite((logs or {}).get("loss"))
        if loss is not None and self.step % BATCH_EVERY == 0:
            with self.log.writers["train"].as_default():
                tf.summary.scalar("batch_loss", loss, step=self.step)

    def on_epoch_end(self, epoch, logs=None):
        done = epoch + 1  # scalars are stepped by epochs completed
        for name, value in (logs or {}).items():
            value = _finite(value)
            if value is None:
                continue
            run, tag = ("validation", name[4:]) if name.startswith("val_") else ("train", name)
            with self.log.writers[run].as_default():
                tf.summary.scalar(f"epoch_{tag}", value, step=done)
        if self.log.histogram_freq and done % self.log.histogram_freq == 0:
            with self.log.writers["train"].as_default():
                for weight in self.model.weights:
                    tf.summary.histogram(weight.path.replace(":", "_"), weight.value, step=done)
        self.log.flush()


def _finite(value) -> float | None:
    """`value` as a float, or None when it is not a finite number (TensorBoard skips those)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
