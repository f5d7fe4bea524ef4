"""The state of a `fit` call's callbacks, saved with each checkpoint and put back on resume.

A callback's counters and best values (EarlyStopping's `wait`, `best`, `best_weights`,
ReduceLROnPlateau's `cooldown_counter`, ...) decide when training stops and how the learning
rate moves; a resumed run that forgot them takes other decisions than the uninterrupted run.
What is saved, per callback, in the order the script passed them:

- a callback with `get_state()` and `set_state(state)` (the protocol for user callbacks): what
  `get_state()` returns, which must be picklable, handed to `set_state` on resume;
- Keras's built-ins: the attributes in `BUILTIN_STATE` (their configuration comes from the
  script again; their effect on the learning rate lives in the optimizer's variables);
- any other callback: its picklable attributes. Those that cannot be pickled (open files,
  lambdas, locks) are left out and named once in a `callback_state_partial` event.

State is put back after every callback's `on_train_begin` (which resets most of them).

Example:

>>> import keras
>>> stop = keras.callbacks.EarlyStopping(patience=3)
>>> stop.wait, stop.best = 2, 0.5
>>> blob, left_out = capture([stop])
>>> again = keras.callbacks.EarlyStopping(patience=3)
>>> restore([again], blob)
[]
>>> again.wait, again.best, left_out
(2, 0.5, {})
"""

from __future__ import annotations

import pickle
from typing import Any

import keras
import numpy as np

# Attributes of Keras's stateful callbacks that training changes; by class name.
BUILTIN_STATE: dict[str, tuple[str, ...]] = {
    "EarlyStopping": ("wait", "best", "best_weights", "best_epoch", "stopped_epoch"),
    "ReduceLROnPlateau": ("wait", "best", "cooldown_counter"),
    "ModelCheckpoint": ("best", "_current_epoch", "_batches_seen_since_last_saving", "_last_batch_seen"),
    "TensorBoard": ("_global_train_batch", "_global_test_batch", "_train_accumulated_time"),
    "History": ("history", "epoch"),
    "LearningRateScheduler": (),  # the rate it set is the optimizer's `learning_rate` variable
    "CSVLogger": (),  # its rows are in its file: `prepare_csv_logger` keeps them whole
    "BackupAndRestore": (),
    "TerminateOnNaN": (),
    "ProgbarLogger": (),
    "LambdaCallback": (),
    "RemoteMonitor": (),
    "SwapEMAWeights": (),
}
_BASE_ATTRIBUTES = frozenset(vars(keras.callbacks.Callback())) | {"model", "validation_data"}


def _builtin(callback: keras.callbacks.Callback) -> str | None:
    """The Keras class name whose state list applies, or None for a user's own class."""
    cls = type(callback)
    if cls.__module__.startswith("keras.") and cls.__name__ in BUILTIN_STATE:
        return cls.__name__
    return None


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value, protocol=4)
    except Exception:  # noqa: BLE001 — pickling raises many kinds (TypeError, PicklingError, AttributeError, ...)
        return False
    return True


def state_of(callback: keras.callbacks.Callback) -> tuple[Any, list[str]]:
    """One callback's state and the names of the attributes left out of it."""
    if callable(getattr(callback, "get_state", None)) and callable(getattr(callback, "set_state", None)):
        return {"protocol": callback.get_state()}, []
    name = _builtin(callback)
    if name is not None:
        return {"attributes": {a: getattr(callback, a) for a in BUILTIN_STATE[name] if hasattr(callback, a)}}, []
    kept, left_out = {}, []
    for attr, value in vars(callback).items():
        if attr in _BASE_ATTRIBUTES:
            continue
        if _picklable(value):
            kept[attr] = value
        else:
            left_out.append(attr)
    return {"attributes": kept}, left_out


def capture(callbacks: list) -> tuple[np.ndarray, dict[str, list[str]]]:
    """All callbacks' state as one uint8 array (for the checkpoint's npz), and what was left out."""
    states, left_out = [], {}
    for callback in callbacks:
        state, missing = state_of(callback)
        states.append((type(callback).__qualname__, state))
        if missing:
            left_out[type(callback).__qualname__] = missing
    blob = pickle.dumps(states, protocol=4)
    return np.frombuffer(blob, dtype=np.uint8), left_out


def restore(callbacks: list, blob: np.ndarray) -> list[str]:
    """Put saved state back; returns the callbacks that did not match the saved ones (by position and class)."""
    states = pickle.loads(np.asarray(blob, dtype=np.uint8).tobytes())  # noqa: S301 — our own checkpoint, verified by sha256
    mismatched = []
    for i, callback in enumerate(callbacks):
        if i >= len(states) or states[i][0] != type(callback).__qualname__:
            mismatched.append(type(callback).__qualname__)
            continue
        state = states[i][1]
        if "protocol" in state:
            callback.set_state(state["protocol"])
        else:
            for attr, value in state["attributes"].items():
                setattr(callback, attr, value)
    return mismatched


def prepare_csv_logger(callback: keras.callbacks.CSVLogger, resume_epoch: int) -> None:
    """Before a resumed `fit`: append to the log, without the rows of epochs that will run again.

    A SIGKILL after an epoch's row was written but before the next checkpoint would otherwise
    leave that epoch's row twice.
    """
    import os

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


def saved_attribute(blob: np.ndarray, position: int, name: str) -> Any:
    """One attribute of the callback at `position` in a saved state, or None."""
    states = pickle.loads(np.asarray(blob, dtype=np.uint8).tobytes())  # noqa: S301 — our own checkpoint
    if position >= len(states):
        return None
    return states[position][1].get("attributes", {}).get(name)


def prepare_tensorboard(callback: keras.callbacks.TensorBoard, resume_epoch: int, train_batches: int | None) -> None:
    """Before a resumed `fit`: drop from earlier attempts' event files what will be logged again.

    After a SIGKILL the epochs and batches between the last checkpoint and the kill were logged
    by the killed attempt and will be logged again: epoch scalars at `step >= resume_epoch` and
    batch scalars past the checkpoint's batch counter are removed, so no step appears twice.
    """
    import os

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
