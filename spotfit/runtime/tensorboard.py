"""TensorBoard logging inside an attempt: the `TensorBoardLogger` Keras callback.

The chief writes, under `<job prefix>/tensorboard/`, the Keras layout: `train/` and
`validation/` runs with `epoch_<metric>` scalars at each epoch end (step = epoch number),
`batch_loss` by global step, and, with `training.histogram_freq: N`, a histogram of every
weight every N epochs. How often `batch_loss` is written is `training.tensorboard_update_freq`:

- `auto` (the default): every N steps, N chosen so that writing costs under 0.5% of the step
  time (`BUDGET_SHARE`): N = write cost / (0.5% x step time), both measured, the write cost
  as the writer thread's CPU seconds per scalar (serializing, checksumming, writing);
- `epoch`: epoch scalars only;
- an integer N: every N steps (1 = every step).

With a GPU, the runtime's latest NVML reading (utilization.py) is logged by global step as
`system/gpu_util` (busy percent, mean over the GPUs) and `system/gpu_mem` (memory used, percent
of the GPUs' total) in the `train` run: at the first step, then at most every `GPU_EVERY_S`,
and at the end of each fit call. Without a GPU nothing is logged (the runtime says "no GPU" once).

The training loop only appends values to a deque: no lock, no thread wake-up. A writer
thread of its own (`TensorBoardLog`) wakes every `DRAIN_S` (or when asked to flush), writes
what is there as event protocol buffers in TensorBoard's record format (~10 us a scalar here;
`tf.summary.scalar` took 0.5 ms, and 160 ms for the first, with eager ops that compete with
training for the interpreter), flushes and uploads, so a step never waits for a write and
never wakes a thread. The values are the ones Keras already gives callbacks, so nothing syncs
the device for them. Only histograms, asked for with `histogram_freq`, use `tf.summary`.
On a `file://` store the event files are written in place; on other stores they are written
to a local folder and uploaded after each epoch and at each checkpoint (the main callback calls
`TensorBoardLog.flush` after every save, which waits for the writer), so a preempted attempt
loses at most the scalars since its last save. Every attempt adds its own event files;
TensorBoard merges them, and the steps continue across attempts because resume is exact.

Each `fit` call gets a `TensorBoardLogger` over the attempt's log, placed before the main
callback. Serving the logs is controller side: spotfit/attempt/tensorboard_server.py.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

from spotfit.attempt.tensorboard_server import PREFIX, local_folder
from spotfit.errors import StoreError

BUDGET_SHARE = 0.005  # `auto`: batch scalars cost at most this share of the step time
UPDATE_FREQS = ("auto", "epoch")  # or an integer number of steps
DRAIN_S = 1.0  # the writer thread writes what the steps queued this often
GPU_EVERY_S = 10.0  # `system/gpu_*` scalars at most this often
_file_ids = itertools.count()


class EventFile:
    """One run's event file in TensorBoard's record format, written by the thread that calls it."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}."
                f"{next(_file_ids)}.spotfit")
        self._file = open(folder / name, "ab")  # open for the attempt's life; the process exit closes it
        self._records = RecordWriter(self._file)
        self.add(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add(self, event: event_pb2.Event) -> None:
        self._records.write(event.SerializeToString())

    def flush(self) -> None:
        self._records.flush()


class TensorBoardLog:
    """One attempt's TensorBoard event files: a writer thread, what it has to write, flushing and uploading.

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
        self._files: dict[str, EventFile] = {}  # by run, opened by the writer thread
        self._histograms: Any = None  # a tf.summary writer, created at the first histogram
        self._uploaded: dict[str, int] = {}
        self._items: deque = deque()  # appended by training, drained by the writer thread (both atomic)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.write_s: float | None = None  # the writer thread's CPU seconds per scalar, last measured
        self._failed = False

    def every(self, step_s: float | None) -> float:
        """Steps until the next batch scalar, for a measured step time (`auto`), or as set.

        >>> log = TensorBoardLog.__new__(TensorBoardLog)
        >>> log.update_freq, log.write_s = "auto", 20e-6
        >>> log.every(0.002), log.every(0.050), log.every(None)
        (2, 1, 1)
        """
        if self.update_freq == "epoch":
            return math.inf
        if isinstance(self.update_freq, int):
            return self.update_freq
        if step_s is None or self.write_s is None or step_s <= 0:
            return 1  # measure first: the next step writes again
        return max(1, math.ceil(self.write_s / (BUDGET_SHARE * step_s)))

    def scalar(self, run: str, tag: str, value: float, step: int) -> None:
        """Queue one scalar; the writer thread writes it within `DRAIN_S`."""
        self._put(("scalar", run, tag, value, step))

    def histogram(self, tag: str, values, step: int) -> None:
        self._put(("histogram", tag, values, step))

    def flush(self) -> None:
        """Write everything queued, flush the files and upload them; returns when done."""
        done = threading.Event()
        self._put(("flush", done))
        self._wake.set()
        done.wait()

    def flush_later(self) -> None:
        """`flush` without waiting for it."""
        self._put(("flush", None))
        self._wake.set()

    def _put(self, item: tuple) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spotfit-tensorboard", daemon=True)
            self._thread.start()
        self._items.append(item)

    def _run(self) -> None:
        while True:
            self._wake.wait(DRAIN_S)
            self._wake.clear()
            self._drain()

    def _drain(self) -> None:
        """Write what is queued, in order; measure the CPU cost of its scalars."""
        cpu_s, scalars = 0.0, 0
        while self._items:
            item = self._items.popleft()
            try:
                if item[0] == "scalar":
                    t0 = time.thread_time()
                    self._scalar(*item[1:])
                    cpu_s, scalars = cpu_s + time.thread_time() - t0, scalars + 1
                elif item[0] == "histogram":
                    self._histogram(*item[1:])
                else:
                    self._flush()
            except Exception as exc:  # noqa: BLE001 — logging must never stop training; say it once
                if not self._failed:
                    self._failed = True
                    sys.stderr.write(f"spotfit: TensorBoard logging failed, training goes on: {exc}\n")
            finally:
                if item[0] == "flush" and item[1] is not None:
                    item[1].set()
        if scalars:
            self.write_s = cpu_s / scalars

    def _scalar(self, run: str, tag: str, value: float, step: int) -> None:
        if run not in self._files:
            self._files[run] = EventFile(self.folder / run)
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        self._files[run].add(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def _histogram(self, tag: str, values, step: int) -> None:
        if self._histograms is None:
            self._histograms = tf.summary.create_file_writer(str(self.folder / "train"))
        with self._histograms.as_default():
            tf.summary.histogram(tag, values, step=step)

    def _flush(self) -> None:
        for file in self._files.values():
            file.flush()
        if self._histograms is not None:
            self._histograms.flush()
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
    """Hands one `fit` call's scalars (and histograms) to the attempt's `TensorBoardLog`.

    `resume_step`: the global step this call resumes at, or None to start at the optimizer's
    step counter (the main callback counts steps the same way). `gpu`: the latest GPU reading
    (progress.json's `gpu` dict), or None on a machine without one.
    """

    def __init__(self, log: TensorBoardLog, resume_step: int | None = None,
                 gpu: Callable[[], dict | None] | None = None):
        super().__init__()
        self.log = log
        self.resume_step = resume_step
        self.gpu = gpu
        self._gpu_logged: tuple[int, float] | None = None  # (step, monotonic s) of the last GPU scalars
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
        if self.gpu is not None:
            self._log_gpu()
        if self.step < self._next_step:
            return
        loss = _finite(logs.get("loss") if logs else None)
        now = time.perf_counter()
        step_s = None
        if self._last is not None and self.step > self._last[0]:
            step_s = (now - self._last[1]) / (self.step - self._last[0])
        if loss is not None:
            self.log.scalar("train", "batch_loss", loss, self.step)
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
        if self.gpu is not None:
            self._log_gpu(due=True)
        self.log.flush()

    def _log_gpu(self, due: bool = False) -> None:
        """The latest GPU reading as `system/gpu_*` scalars at this step, when `GPU_EVERY_S` passed (or `due`)."""
        reading = self.gpu() if self.gpu is not None else None
        if reading is None:
            return
        now = time.monotonic()
        if self._gpu_logged is not None:
            step, at = self._gpu_logged
            if step == self.step or (not due and now - at < GPU_EVERY_S):
                return
        self.log.scalar("train", "system/gpu_util", float(reading["util_pct"]), self.step)
        self.log.scalar("train", "system/gpu_mem", float(reading["mem_pct"]), self.step)
        self._gpu_logged = (self.step, now)


def _finite(value) -> float | None:
    """`value` as a float, or None when it is not a finite number (TensorBoard skips those)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
