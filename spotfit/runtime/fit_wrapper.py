"""The Keras 3 `keras.Model.fit` wrapper that makes unmodified scripts checkpoint and resume exactly.

`install(session)` replaces `keras.Model.fit` for the rest of the process with the wrapper of
fit_call.py, built from Keras 3's `Flavor` (`KERAS3`): the resuming epoch iterator (resume.py) is
armed at the saved epoch and batch, a skipped call's shared data is drawn again
(`_advance_shared_data`), and before each call the speed-ups that have work get their callbacks
(precision.py, xla.py, offer.py, tensorboard.py); the main callback (`instrument.SpotfitCallback`)
goes last. `install` also activates `spotfit.loop` (custom_loop.py) and the hook that counts
unmodified `GradientTape` loops (apply_hook.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import keras

from spotfit.runtime import apply_hook, choices, custom_loop, instrument, precision, resume
from spotfit.runtime.fit_call import Flavor, make_fit
from spotfit.runtime.tensorboard import TensorBoardLogger

if TYPE_CHECKING:
    from spotfit.runtime.checkpoint import Checkpoint
    from spotfit.runtime.session import Session

_original_fit = keras.Model.fit


def _before_call(session: Session, model: keras.Model, call: dict) -> None:
    """Before a Keras 3 fit call: float32 outputs under a policy spotfit set, XLA, offers."""
    if session.choices is not None and session.choices.applied_policy is not None:
        changed = precision.keep_outputs_float32(model)  # the script's own policy: its model as it built it
        if changed:
            session.reporter.event("precision_outputs", f"output layers {changed} run in float32", layers=changed)
    if session.precision is not None:
        session.precision.before_fit(model)
    if session.xla is not None and choices.xla_applies(session, model):
        session.xla.before_fit(model)
    if session.offer is not None:
        session.offer.before_fit(call.get("x"), call.get("y"), call.get("batch_size"))


def _speedup_callbacks(session: Session, start_ckpt: Checkpoint | None, main) -> list:
    """The speed-ups' callbacks where they have work, and the TensorBoard log's (flushed after each save)."""
    callbacks: list = []
    if session.precision is not None and session.precision.measuring:
        callbacks.append(session.precision)
    if session.xla is not None and session.xla.measuring:
        callbacks.append(session.xla)
    if session.offer is not None and session.offer.pending:
        callbacks.append(session.offer)
    if session.tensorboard is not None:
        start = session.calls.base_step if start_ckpt is None else start_ckpt.meta["step"]
        state = session.reporter.state
        callbacks.append(TensorBoardLogger(session.tensorboard, start, gpu=lambda: state.get("gpu")))
        main.after_save = (session.tensorboard.flush,)
    return callbacks


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


KERAS3 = Flavor(_original_fit, keras.callbacks.History, instrument.SpotfitCallback, resume.arm, resume.disarm,
                _advance_shared_data, _before_call, _speedup_callbacks)


def install(session: Session) -> None:
    """Replace `keras.Model.fit` for the rest of this process; `spotfit.loop` checkpoints too."""
    resume.install()
    custom_loop.activate(session)
    apply_hook.install(session)  # unmodified GradientTape loops
    keras.Model.fit = make_fit(session, KERAS3)
