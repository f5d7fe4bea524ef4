"""The `keras.Model.fit` wrapper that makes unmodified scripts checkpoint and resume exactly.

`install(session)` replaces `keras.Model.fit` for the rest of the process. The wrapper is built
by `make_fit` from a `Flavor`, what differs between Keras 3 and Keras 2 (runtime/keras2/ wraps
Keras 2's `fit` the same way). Each call binds the script's arguments as Keras would, adds a
`History` of spotfit's own when the script gave none (so that its state is checkpointed too), and
asks the job's fit-call bookkeeping (fit_calls.py) what this call is:
- an earlier call that ended before the checkpoint returns at once with its recorded end state;
- the call the checkpoint was taken in arms the resuming epoch iterator (resume.py) at the saved
  epoch and batch, with the validation runs already done;
- a later call starts as the script wrote it.

Before the call runs, the speed-ups that have work get their callbacks (precision.py, xla.py,
offer.py, tensorboard.py), and the main callback (`instrument.SpotfitCallback`) goes last.
`install` also activates `spotfit.loop` (custom_loop.py) and the hook that counts unmodified
`GradientTape` loops (apply_hook.py).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from spotfit.runtime import apply_hook, callback_logs, choices, custom_loop, export, instrument, precision, resume
from spotfit.runtime.checkpoint import Checkpoint
from spotfit.runtime.model_state import restore
from spotfit.runtime.tensorboard import TensorBoardLogger

if TYPE_CHECKING:
    from spotfit.runtime.session import Session

_original_fit = keras.Model.fit


def _prepare(session: Session, model: keras.Model, call: dict) -> None:
    """Before a fit call: float32 outputs under a policy spotfit set, XLA, offers, the card's data source."""
    x = call.get("x")
    if session.choices is not None and session.choices.applied_policy is not None:
        changed = precision.keep_outputs_float32(model)  # the script's own policy: its model as it built it
        if changed:
            session.reporter.event("precision_outputs", f"output layers {changed} run in float32", layers=changed)
    if session.precision is not None:
        session.precision.before_fit(model)
    if session.xla is not None and choices.xla_applies(session, model):
        session.xla.before_fit(model)
    if session.offer is not None:
        session.offer.before_fit(x, call.get("y"), call.get("batch_size"))
    session.fit_inputs.append(export.describe_inputs(x))
    if session.sample_x is None and isinstance(x, np.ndarray):
        session.sample_x = x[: export.SAMPLE_ROWS]


def _callbacks(session: Session, flavor: Flavor, start_ckpt: Checkpoint | None, watched: list,
               initial_epoch: int) -> list:
    """spotfit's callbacks of one fit call: the speed-ups' where they have work, then the main one.

    The main callback comes last: it may end training at a step, after the others saw it, and
    it puts the other callbacks' state back after their own `on_train_begin` reset it.
    """
    main = flavor.main_callback(session, start_ckpt, watched, initial_epoch)
    if not flavor.speedups:
        return [main]
    callbacks: list = []
    if session.precision is not None and session.precision.measuring:
        callbacks.append(session.precision)
    if session.xla is not None and session.xla.measuring:
        callbacks.append(session.xla)
    if session.offer is not None and session.offer.pending:
        callbacks.append(session.offer)
    after_save: tuple[Callable[[], None], ...] = ()
    if session.tensorboard is not None:
        start = session.calls.base_step if start_ckpt is None else start_ckpt.meta["step"]
        state = session.reporter.state
        callbacks.append(TensorBoardLogger(session.tensorboard, start, gpu=lambda: state.get("gpu")))
        after_save = (session.tensorboard.flush,)
    main.after_save = after_save
    callbacks.append(main)
    return callbacks


def _skip(session: Session, flavor: Flavor, model: keras.Model, record: Checkpoint | None, watched: list,
          call: dict):
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
    instrument.restore_callbacks(session, watched, record.arrays)
    session.reporter.progress(step=record.meta["step"])
    model.history = history
    data = f"; its data drawn again ({drawn} batches), as a later call sharing it expects" if drawn else ""
    session.reporter.event("fit_skipped", f"fit call {index} finished before the checkpoint: restored its end "
                           f"state at step {record.meta['step']}{data}", fit_index=index, step=record.meta["step"],
                           data_batches=drawn)
    return history


def _advance_shared_data(model: keras.Model, call: dict) -> int:
    """A skipped call's epochs drawn from its `x` when `x` keeps state across calls: how many batches.

    A `PyDataset` (its `on_epoch_end`, often a reshuffle) and a `tf.data.Dataset` (`shuffle`
    reshuffles each iteration) advance with every epoch a call produces, and a later call that
    shares the object starts where they stand. The skipped call's epochs are drawn without
    training, through the epoch iterator `fit` builds (as an in-call resume draws its epochs,
    resume.py), so the later call sees its data as uninterrupted. Arrays are rebuilt per call:
    nothing to draw. Not replayed: RNG draws inside a `PyDataset.__getitem__` and a shared
    validation pipeline's reshuffles (these change `val_*` metrics' last bits, not the weights).
    """
    import tensorflow as tf

    x = call.get("x")
    epochs = int(call.get("epochs") or 1) - int(call.get("initial_epoch") or 0)
    if epochs <= 0 or not isinstance(x, (keras.utils.PyDataset, tf.data.Dataset)):
        return 0
    resume.arm(resume.Position(epoch=epochs))
    try:
        iterator = resume.ResumingEpochIterator(
            x=x, y=call.get("y"), sample_weight=call.get("sample_weight"), batch_size=call.get("batch_size"),
            steps_per_epoch=call.get("steps_per_epoch"), shuffle=call.get("shuffle", True),
            class_weight=call.get("class_weight"), distribute_strategy=model.distribute_strategy,
            steps_per_execution=model.steps_per_execution)
        iterator.reset()
    finally:
        resume.disarm()
    return int(iterator.replayed_batches)


def _validation_x(validation_data):
    """The `x` that `fit` builds its validation epoch iterator over (Keras's `unpack_x_y_sample_weight`)."""
    if isinstance(validation_data, (tuple, list)):
        return validation_data[0] if validation_data else None
    return validation_data


@dataclass(frozen=True)
class Flavor:
    """What differs between the Keras versions around one `fit` call (runtime/keras2/ has Keras 2's).

    `original_fit`: the class's own `fit`. `history`: its `History` class. `main_callback`: the
    class of spotfit's main callback on its `Callback` base. `arm(position, validation_x,
    validations)` / `disarm()`: the resuming data position of the next call. `advance_shared_data(
    model, call)`: a skipped call's epochs drawn from data it shares with later calls (batches
    drawn). `speedups`: whether the call gets spotfit's speed-up and TensorBoard callbacks.
    """

    original_fit: Callable
    history: type
    main_callback: type
    arm: Callable[..., None]
    disarm: Callable[[], None]
    advance_shared_data: Callable[[Any, dict], int]
    speedups: bool = True


KERAS3 = Flavor(_original_fit, keras.callbacks.History, instrument.SpotfitCallback, resume.arm, resume.disarm,
                _advance_shared_data)


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
            flavor.arm(resume.Position(epoch=done, batch=meta["batch"]), validation_x,
                       resume.validations_done(done, initial_epoch, call.get("validation_freq") or 1))
        session.model = self
        _prepare(session, self, call)
        callback_logs.prepare(watched, start.checkpoint, session.reporter.event)
        call["callbacks"] = [*user, *_callbacks(session, flavor, start.checkpoint, watched, initial_epoch)]
        try:
            return flavor.original_fit(self, **call)
        finally:
            flavor.disarm()
            self._initial_epoch = None
            session.watcher.in_training = False

    return fit


def install(session: Session) -> None:
    """Replace `keras.Model.fit` for the rest of this process; `spotfit.loop` checkpoints too."""
    resume.install()
    custom_loop.activate(session)
    apply_hook.install(session)  # unmodified GradientTape loops
    keras.Model.fit = make_fit(session, KERAS3)
