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

import numpy as np

# Attributes of Keras's stateful callbacks that training changes; by class name.
BUILTIN_STATE: dict[str, tuple[str, ...]] = {
    "EarlyStopping": ("wait", "best", "best_weights", "best_epoch", "stopped_epoch"),
    "ReduceLROnPlateau": ("wait", "best", "cooldown_counter"),
    # `epochs_since_last_save`: Keras 2's count toward its `period`.
    "ModelCheckpoint": ("best", "_current_epoch", "_batches_seen_since_last_saving", "_last_batch_seen",
                        "epochs_since_last_save"),
    "TensorBoard": ("_global_train_batch", "_global_test_batch", "_train_accumulated_time"),
    "History": ("history", "epoch"),
    "LearningRateScheduler": (),  # the rate it set is the optimizer's `learning_rate` variable
    "CSVLogger": (),  # its rows are in its file: callback_logs.py keeps them whole
    "BackupAndRestore": (),
    "TerminateOnNaN": (),
    "ProgbarLogger": (),
    "LambdaCallback": (),
    "RemoteMonitor": (),
    "SwapEMAWeights": (),
}
# What every callback has from its base class, Keras 3's (`_model`, `params`) and Keras 2's:
# configuration, not state (tests/runtime/test_callback_state.py checks both lists).
_BASE_ATTRIBUTES = frozenset({"_model", "params", "model", "validation_data", "_chief_worker_only",
                              "_supports_tf_logs"})
KERAS_MODULES = ("keras.", "tf_keras.")  # Keras 3's and Keras 2's (`tf-keras`) packages


def _builtin(callback: Any) -> str | None:
    """The Keras class name whose state list applies, or None for a user's own class."""
    cls = type(callback)
    if cls.__module__.startswith(KERAS_MODULES) and cls.__name__ in BUILTIN_STATE:
        return cls.__name__
    return None


def is_keras(callback: object, name: str) -> bool:
    """Whether `callback` is an instance of Keras's (3's or 2's) callback class `name`, or of a subclass."""
    return any(c.__name__ == name and c.__module__.startswith(KERAS_MODULES) for c in type(callback).__mro__)


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value, protocol=4)
    except Exception:  # noqa: BLE001 — pickling raises many kinds (TypeError, PicklingError, AttributeError, ...)
        return False
    return True


def state_of(callback: Any) -> tuple[Any, list[str]]:
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


def saved_attribute(blob: np.ndarray, position: int, name: str) -> Any:
    """One attribute of the callback at `position` in a saved state, or None."""
    states = pickle.loads(np.asarray(blob, dtype=np.uint8).tobytes())  # noqa: S301 — our own checkpoint
    if position >= len(states):
        return None
    return states[position][1].get("attributes", {}).get(name)
