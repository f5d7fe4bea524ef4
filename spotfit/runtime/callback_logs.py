"""The callbacks' log files and hooks when a `fit` call resumes.

Callback *state* is saved and restored by callback_state.py; what a callback already wrote to
disk needs its own care. A killed attempt may have logged epochs or batches past its last
checkpoint, which the resumed attempt logs again: CSVLogger rows and TensorBoard scalars of
those are removed first, so every epoch and step is in the logs once. A resume in the middle of
an epoch does not call the callbacks' `on_epoch_begin` again: that epoch began before the
checkpoint, and what the hook did (a LearningRateScheduler's rate) is in the restored state.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from spotfit.runtime import callback_state
from spotfit.runtime.checkpoint import Checkpoint


def prepare(watched: list, start_ckpt: Checkpoint | None, event: Callable[..., None]) -> None:
    """Before a `fit` call: on resume, CSV and TensorBoard logs lose what will be logged again, and
    a mid-epoch resume does not begin the epoch twice; BackupAndRestore does not restore, and is
    said to be redundant.

    `watched`: the call's callbacks in the order of the saved callback state (History first).
    """
    meta = None if start_ckpt is None else start_ckpt.meta
    for position, cb in enumerate(watched):  # positions as in the saved callback state
        if callback_state.is_keras(cb, "BackupAndRestore"):
            # Two restores would disagree (its backup is per epoch, and it sets the initial epoch
            # without the data replay): spotfit's checkpoint is the one resumed.
            cb.on_train_begin = _no_restore
            event("backup_and_restore_redundant", "BackupAndRestore is redundant under spotfit, which "
                  "checkpoints every step exactly; its restore is turned off, its backups are still written")
        if meta is None:
            continue
        if callback_state.is_keras(cb, "CSVLogger"):
            prepare_csv_logger(cb, meta["epoch"])
        if callback_state.is_keras(cb, "TensorBoard") and start_ckpt is not None and "callbacks" in start_ckpt.arrays:
            batches = callback_state.saved_attribute(start_ckpt.arrays["callbacks"], position, "_global_train_batch")
            prepare_tensorboard(cb, meta["epoch"], batches)
        if meta["batch"]:
            skip_next_epoch_begin(cb)


def _no_restore(logs=None) -> None:
    """BackupAndRestore's `on_train_begin` under spotfit: nothing to load."""


def skip_next_epoch_begin(callback: Any) -> None:
    """The resumed epoch already began before the checkpoint (its effects are in the restored state)."""
    def on_epoch_begin(epoch, logs=None):
        del callback.on_epoch_begin  # the class's own hook from the next epoch on

    callback.on_epoch_begin = on_epoch_begin


def prepare_csv_logger(callback: Any, resume_epoch: int) -> None:
    """Before a resumed `fit`: append to the log, without the rows of epochs that will run again.

    A SIGKILL after an epoch's row was written but before the next checkpoint would otherwise
    leave that epoch's row twice.
    """
    callback.append = True
    if not os.path.exists(callback.filename):
        return
    with open(callback.filename, encoding="utf-8") as f:
        lines = f.readlines()
    if not lines:
        return
    header = lines[0].rstrip("\r\n").split(callback.sep)
    column = header.index("epoch") if "epoch" in header else None
    kept = [lines[0]] + [row for row in lines[1:] if column is not None and row.strip()
                         and _epoch(row, callback.sep, column) < resume_epoch]
    with open(callback.filename, "w", encoding="utf-8") as f:
        f.writelines(kept)


def _epoch(row: str, sep: str, column: int) -> float:
    try:
        return float(row.rstrip("\r\n").split(sep)[column])
    except (ValueError, IndexError):
        return float("inf")


def prepare_tensorboard(callback: Any, resume_epoch: int, train_batches: int | None) -> None:
    """Before a resumed `fit`: drop from earlier attempts' event files what will be logged again.

    After a SIGKILL the epochs and batches between the last checkpoint and the kill were logged
    by the killed attempt and will be logged again: epoch scalars at `step >= resume_epoch` and
    batch scalars past the checkpoint's batch counter are removed, so no step appears twice.
    """
    import tensorflow as tf
    from tensorboard.compat.proto import event_pb2

    for run in ("train", "validation"):
        folder = os.path.join(callback.log_dir, run)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.startswith("events.out.tfevents"):
                continue
            path = os.path.join(folder, name)
            kept, dropped = [], 0
            for record in tf.data.TFRecordDataset(path):
                event = event_pb2.Event.FromString(record.numpy())
                values = [v for v in event.summary.value if not _logged_again(v.tag, event.step, resume_epoch,
                                                                              train_batches)]
                if event.HasField("summary") and len(values) < len(event.summary.value):
                    dropped += 1
                    if not values:
                        continue
                    del event.summary.value[:]
                    event.summary.value.extend(values)
                kept.append(event.SerializeToString())
            if dropped:
                with tf.io.TFRecordWriter(path + ".tmp") as writer:
                    for record in kept:
                        writer.write(record)
                os.replace(path + ".tmp", path)


def _logged_again(tag: str, step: int, resume_epoch: int, train_batches: int | None) -> bool:
    """Epoch scalars are stepped by epoch; batch scalars and `evaluation_*_vs_iterations` by the
    call's batches (the optimizer's iterations when the call compiled a new optimizer)."""
    if tag.startswith("epoch_"):
        return step >= resume_epoch
    if (tag.startswith("batch_") or tag.startswith("evaluation_")) and train_batches is not None:
        return step > train_batches
    return False
