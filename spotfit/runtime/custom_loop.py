"""The runtime side of `spotfit.loop`: a custom loop driven through the same callback as `fit`.

A custom loop is one more "fit call" of the job (fit_calls.py): it is skipped with its recorded
end state when a later call's checkpoint exists, resumed at its step, or started afresh. Its
steps go through `SpotfitCallback`'s hooks as Keras would call them (train begin, batch ends,
train end: one epoch of `steps` batches), so restore, progress, holds, notices, stop requests and saves behave
exactly as in `fit`. The data position is the number of steps done: on resume that many
batches are drawn again and discarded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from spotfit.runtime.loop_data import batches

if TYPE_CHECKING:
    from spotfit.runtime.session import Session

_session: list[Session] = []


def activate(session: Session) -> None:
    """`spotfit.loop` checkpoints under this session from now on (set by `fit_wrapper.install`)."""
    _session[:] = [session]


def active_session() -> Session | None:
    return _session[0] if _session else None


def run(session: Session, model: Any, data: Iterable | Callable[[], Iterable], steps: int,
        optimizer: Any) -> Iterator[tuple[int, Any]]:
    from spotfit.runtime import apply_hook, instrument

    if optimizer is not None and getattr(model, "optimizer", None) is None:
        model.optimizer = optimizer  # what the checkpoint saves with the model's variables
    if model.optimizer is None:
        raise ValueError("spotfit.loop: the model has no optimizer; pass `optimizer=` (the one the loop "
                         "applies gradients with) so that its state is checkpointed")
    apply_hook.finish()  # an unmodified loop before this one ends here
    start = session.calls.begin()
    if start.role == "skip":
        _skip(session, model, start.checkpoint)
        return
    session.model = model
    callback = instrument.SpotfitCallback(session, start.checkpoint, watched=[], planned_steps=steps)
    callback.set_model(model)
    callback.set_params({"steps": None, "epochs": 1, "verbose": 0})  # one "epoch" of `steps` batches
    callback.on_train_begin()  # no on_epoch_begin: it would put Python's RNG back to the loop's start
    done = 0 if start.checkpoint is None else int(start.checkpoint.meta["batch"])
    for step, batch in batches(data, steps, start=done):
        yield step, batch
        callback.on_train_batch_end(step)  # may save, and raise Preempted on a notice
    callback.on_train_end()


def _skip(session: Session, model: Any, record: Any) -> None:
    from spotfit.runtime import model_state

    index = session.calls.index
    if record is None:
        session.reporter.event("fit_skipped", f"loop {index} finished before the checkpoint; its end state was "
                               "not recorded, the next call restores the checkpoint")
        return
    model_state.restore(model, record.arrays, record.meta)
    session.reporter.event("fit_skipped", f"loop {index} finished before the checkpoint: restored its end "
                           f"state at step {record.meta['step']}", fit_index=index, step=record.meta["step"])
