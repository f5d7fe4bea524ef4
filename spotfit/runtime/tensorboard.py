"""TensorBoard logging inside an attempt: the `TensorBoardLogger` Keras callback.

The chief writes, under `<job prefix>/tensorboard/`, the Keras layout: `train/` and
`validation/` runs with `epoch_<metric>` scalars at each epoch end (step = epoch number),
`batch_loss` by global step, and, with `training.histogram_freq: N`, a histogram of every
weight every N epochs. How often `batch_loss` is written is `training.tensorboard_update_freq`:

- `auto` (the default): every N steps, N chosen so that writing costs under 0.5% of the step
  time (`BUDGET_SHARE`): after each write, N = write cost / (0.5% x step time), both measured;
- `epoch`: epoch scalars only;
- an integer N: every N steps (1 = every step).

The training loop only hands values to a queue; a writer thread of its own (`TensorBoardLog`)
writes, flushes and uploads, so a step never waits for a write. The values are the ones Keras
already gives callbacks, so nothing syncs the device for them. Scalars are written as event
protocol buffers with the `tensorboard` package's `EventFileWriter` (~15 us each here), not
with `tf.summary` (0.5 ms each, and 160 ms for the first, eager ops that compete with training
for the interpreter); only histograms, asked for with `histogram_freq`, use `tf.summary`.
On a `file://` store the event files are written in place; on other stores they are written
to a local folder and uploaded after each epoch and at each checkpoint (the main callback calls
`TensorBoardLog.flush` after every save, which waits for the queue), so a preempted attempt
loses at most the scalars since its last save. Every attempt adds its own event files;
TensorBoard merges them, and the steps continue across attempts because resume is exact.

Each `fit` call gets a `TensorBoardLogger` over the attempt's log, placed before the main
callback. Serving the logs is controller side: spotfit/tensorboard_server.py.
"""

from __future__ import annotations

import math
import queue
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from spotfit.errors import StoreError
from spotfit.tensorboard_server import PREFIX, local_folder

BUDGET_SHARE = 0.005  # `auto`: batch scalars cost at most this share of the step time
UPDATE_FREQS = ("auto", "epoch")  # or an integer number of steps


class TensorBoardLog:
    """One attempt's TensorBoard event files: a writer thread, its queue, flushing and uploading.

    `update_freq`: `auto`, `epoch` or a number of steps (see the module docstring).
    """

    def __init__(self, store, histogram_freq: int = 0, update_freq: str | int = "auto"):
        if update_freq not in UPDATE_FREQS and not (isinstance(update_freq, int) and update_freq >= 1):
            raise ValueError(f"Invalid `training.tensorboard_update_freq`: received {update_freq!r}, "
                             "expected `auto`, `epoch` or a number of steps >= 1.")
        self.store = store
        self.histogram_freq = histogram_freq
        self.update_freq = update_freq
        folder = local_folder(store.url)
        self._remote = folder is None
        self.folder = folder or Path(tempfile.mkdtemp(prefix="spotfit-tb-"))
        self.writers = {run: EventFileWriter(str(self.folder / run), filename_suffix=".spotfit")
                        for run in ("train", "validation")}
        self._histograms: Any = None  # a tf.summary writer, created at the first histogram
        self._uploaded: dict[str, int] = {}
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self.write_s: float | None = None  # the last batch scalar's write cost, measured by the thread
        self._failed = False

    def every(self, step_s: float | None) -> float:
        """Steps until the next batch scalar, for a measured step time (`auto`), or as set."""
        if self.update_freq == "epoch":
            return math.inf
        if isinstance(self.update_freq, int):
            return self.update_freq
        if step_s is None or self.write_s is None or step_s <= 0:
            return 1  # measure first: the next step writes again
        return max(1, math.ceil(self.write_s / (BUDGET_SHARE * step_s)))

    def scalar(self, run: str, tag: str, value: float, step: int, timed: bool = False) -> None:
        """Queue one scalar; `timed`: its write cost sets `write_s`."""
        self._put(("scalar", run, tag, value, step, timed))

    def histogram(self, tag: str, values, step: int) -> None:
        self._put(("histogram", "train", tag, values, step, False))

    def flush(self) -> None:
        """Write everything queued, flush the files and upload them; returns when done."""
        self._put(("flush",))
        self._queue.join()

    def flush_later(self) -> None:
        """`flush` without waiting for it."""
        self._put(("flush",))

    def _put(self, item: tuple) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spotfit-tensorboard", daemon=True)
            self._thread.start()
        self._queue.put(item)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                self._write(item)
            except Exception as exc:  # noqa: BLE001 — logging must never stop training; say it once
                if not self._failed:
                    self._failed = True
                    sys.stderr.write(f"spotfit: TensorBoard logging failed, training goes on: {exc}\n")
            finally:
                self._queue.task_done()

    def _write(self, item: tuple) -> None:
        if item[0] == "flush":
            for writer in self.writers.values():
                writer.flush()
            if self._histograms is not None:
                self._histograms.flush()
            if self._remote:
                self._upload()
            return
        kind, run, tag, value, step, timed = item
        t0 = time.perf_counter()
        if kind == "scalar":
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
            self.writers[run].add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        else:
            if self._histograms is None:
                self._histograms = tf.summary.create_file_writer(str(self.folder / "train"))
            with self._histograms.as_default():
                tf.summary.histogram(tag, value, step=step)
        if timed:
            self.write_s = time.perf_counter() - t0

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
    """Hands one `fit` call's scalars (and histograms) to the attempt's `TensorBoardLog`.

    `resume_step`: the global step this call resumes at, or None to start at the optimizer's
    step counter (the main callback counts steps the same way).
    """

    def __init__(self, log: TensorBoardLog, resume_step: int | None = None):
        super().__init__()
        self.log = log
        self.resume_step = resume_step
        self.step = 0
        self._next_step: float = 0
        self._last: tuple[int, float] | None = None  # (step, perf_counter) of the last batch scalar

    def on_train_begin(self, logs=None):
        if self.resume_step is not None:
            self.step = self.resume_step
        else:
            self.step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        freq = self.log.update_freq
        if isinstance(freq, int):
            self._next_step = (self.step // freq + 1) * freq  # global steps N, 2N, ... across attempts
        else:
            self._next_step = self.step + 1 if freq == "auto" else math.inf
        self._last = None

    def on_train_batch_end(self, batch, logs=None):
        self.step += self.model.steps_per_execution
        if self.step < self._next_step:
            return
        loss = _finite(logs.get("loss") if logs else None)
        now = time.perf_counter()
        step_s = None
        if self._last is not None and self.step > self._last[0]:
            step_s = (now - self._last[1]) / (self.step - self._last[0])
        if loss is not None:
            self.log.scalar("train", "batch_loss", loss, self.step, timed=True)
        self._last = (self.step, now)
        self._next_step = self.step + self.log.every(step_s)

    def on_epoch_end(self, epoch, logs=None):
        done = epoch + 1  # scalars are stepped by epochs completed
        for name, value in (logs or {}).items():
            value = _finite(value)
            if value is None:
                continue
            run, tag = ("validation", name[4:]) if name.startswith("val_") else ("train", name)
            self.log.scalar(run, f"epoch_{tag}", value, done)
        if self.log.histogram_freq and done % self.log.histogram_freq == 0:
            for weight in self.model.weights:
                self.log.histogram(weight.path.replace(":", "_"), keras.ops.convert_to_numpy(weight.value), done)
        self.log.flush_later()
        self._last = None  # epoch-end work (validation) is not step time

    def on_train_end(self, logs=None):
        self.log.flush()


def _finite(value) -> float | None:
    """`value` as a float, or None when it is not a finite number (TensorBoard skips those)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
