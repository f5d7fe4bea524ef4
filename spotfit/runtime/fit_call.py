"""One instrumented `fit` call, whatever the Keras: the wrapper that checkpoints and resumes it exactly.

`make_fit(session, flavor)` builds the `fit` that replaces a Keras `Model.fit`: Keras 3's
(fit_wrapper.py, `KERAS3`) or Keras 2's (keras2/fit.py). Each call binds the script's arguments
as Keras would, adds a `History` of spotfit's own when the script gave none (so that its state is
checkpointed too), and asks the job's fit-call bookkeeping (fit_calls.py) what this call is:
- an earlier call that ended before the checkpoint returns at once with its recorded end state;
- the call the checkpoint was taken in arms the flavor's data replay at the saved epoch and
  batch, with the validation runs already done;
- a later call starts as the script wrote it.

The flavor's own work before the call (Keras 3's speed-ups) and its callbacks come from the
`Flavor`; the main callback goes last. This module imports no Keras: a Keras 2 attempt does not
load Keras 3.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from spotfit.runtime import apply_hook, callback_logs, export
from spotfit.runtime.hooks import restore_callbacks
from spotfit.runtime.model_state import restore
from spotfit.runtime.position import Position, validations_done

if TYPE_CHECKING:
    from spotfit.runtime.checkpoint import Checkpoint
    from spotfit.runtime.session import Session


@dataclass(frozen=True)
class Flavor:
    """What differs between the Keras versions around one `fit` call (runtime/keras2/ has Keras 2's).

    `original_fit`: the class's own `fit`. `history`: its `History` class. `main_callback`: the
    class of spotfit's main callback on its `Callback` base. `arm(position, validation_x,
    validations)` / `disarm()`: the resuming data position of the next call. `advance_shared_data(
    model, call)`: a skipped call's epochs drawn from data it shares with later calls (batches
    drawn). `before_call(session, model, call)`: the flavor's work before a call runs (Keras 3's
    speed-ups). `extra_callbacks(session, start_ckpt, main)`: its callbacks before the main one
    (they may set the main one's `after_save`).
    """

    original_fit: Callable
    history: type
    main_callback: type
    arm: Callable[..., None]
    disarm: Callable[[], None]
    advance_shared_data: Callable[[Any, dict], int]
    before_call: Callable[[Session, Any, dict], None] = lambda session, model, call: None
    extra_callbacks: Callable[[Session, Any, Any], list] = lambda session, start_ckpt, main: []


def callbacks(session: Session, flavor: Flavor, start_ckpt: Checkpoint | None, watched: list,
              initial_epoch: int) -> list:
    """spotfit's callbacks of one fit call: the flavor's (Keras 3's speed-ups) where they have work, then
    the main one.

    The main callback comes last: it may end training at a step, after the others saw it, and
    it puts the other callbacks' state back after their own `on_train_begin` reset it.
    """
    main = flavor.main_callback(session, start_ckpt, watched, initial_epoch)
    return [*flavor.extra_callbacks(session, start_ckpt, main), main]


def _record_inputs(session: Session, call: dict) -> None:
    """What the call trains on, for the model card; a few rows of arrays, to verify an export."""
    x = call.get("x")
    session.fit_inputs.append(export.describe_inputs(x))
    if session.sample_x is None and isinstance(x, np.ndarray):
        session.sample_x = x[: export.SAMPLE_ROWS]


def _skip(session: Session, flavor: Flavor, model: Any, record: Checkpoint | None, watched: list, call: dict):
    """An earlier fit call returns at once, ending with its recorded state; returns its History."""
    index = session.calls.index
    history = watched[0]
    history.set_model(model)
    history.epoch = []  # as after an empty fit, unless the record's state fills it
    if record is None:
        session.reporter.event("fit_skipped", f"fit call {index} finished before the checkpoint; its end "
                               "state was not recorded, the next call restores the checkpoint")
        return history
    drawn = flavor.advance_shared_data(model, call)
    restore(model, record.arrays, record.meta)  # after the draws: the RNG states are the call's end ones
    restore_callbacks(session, watched, record.arrays)
    session.reporter.progress(step=record.meta["step"])
    model.history = history
    data = f"; its data drawn again ({drawn} batches), as a later call sharing it expects" if drawn else ""
    session.reporter.event("fit_skipped", f"fit call {index} finished before the checkpoint: restored its end "
                           f"state at step {record.meta['step']}{data}", fit_index=index, step=record.meta["step"],
                           data_batches=drawn)
    return history


def _validation_x(validation_data):
    """The `x` that `fit` builds its validation epoch iterator over (Keras's `unpack_x_y_sample_weight`)."""
    if isinstance(validation_data, (tuple, list)):
        return validation_data[0] if validation_data else None
    return validation_data


def make_fit(session: Session, flavor: Flavor) -> Callable:
    """`flavor`'s `Model.fit`, instrumented: each call checkpoints and resumes exactly."""
    signature = inspect.signature(flavor.original_fit)

    @functools.wraps(flavor.original_fit)  # its name, doc and the markers Keras reads on it
    def fit(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        call = dict(bound.arguments)
        call.pop("self")
        call.update(call.pop("kwargs", {}))
        user = list(call.get("callbacks") or [])
        history = next((cb for cb in user if isinstance(cb, flavor.history)), None)
        if history is None:  # ours, so that its state is saved too (Keras uses a History it is given)
            # Last of the script's callbacks, where Keras puts its own: it then records what
            # they add to an epoch's logs (ReduceLROnPlateau's `learning_rate`).
            history = flavor.history()
            user.append(history)
        watched = [history, *(cb for cb in user if cb is not history)]
        apply_hook.finish()  # a custom loop before this call ends here
        start = session.calls.begin()
        if start.role == "skip":
            session.model = self  # a script whose calls all ended before the checkpoint ends with their state
            return _skip(session, flavor, self, start.checkpoint, watched, call)
        meta = None if start.checkpoint is None else start.checkpoint.meta
        initial_epoch = int(call.get("initial_epoch") or 0)
        if meta is not None:
            session.resume_checkpoint = None
            # The pipeline produced `epoch - initial_epoch` epochs in this call before the checkpoint.
            done = meta["epoch"] - initial_epoch
            validation_x = _validation_x(call.get("validation_data"))
            flavor.arm(Position(epoch=done, batch=meta["batch"]), validation_x,
                       validations_done(done, initial_epoch, call.get("validation_freq") or 1))
        session.model = self
        flavor.before_call(session, self, call)
        _record_inputs(session, call)
        callback_logs.prepare(watched, start.checkpoint, session.reporter.event)
        call["callbacks"] = [*user, *callbacks(session, flavor, start.checkpoint, watched, initial_epoch)]
        try:
            return flavor.original_fit(self, **call)
        finally:
            flavor.disarm()
            self._initial_epoch = None
            session.watcher.in_training = False

    return fit
