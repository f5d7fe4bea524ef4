"""Exact data position on resume: an epoch iterator that replays the input pipeline.

Keras 3 builds a `TFEpochIterator` at the start of `fit`. An uninterrupted run draws batches
from it in a fixed pattern: whole epochs, then part of the current one. Shuffling tf.data
pipelines (`Dataset.shuffle`, reshuffled each iteration) and `PyDataset.on_epoch_end` derive
each epoch's order from how many epochs the pipeline has already produced, so the only robust
way to stand at the same place in the same order after a restart is to draw the same batches
again without training on them. `ResumingEpochIterator` does that once, in `reset()`, when
`fit` arms it with the checkpoint's position; every other epoch iterator behaves as Keras's.

Reading the data again costs input-pipeline time (no model compute); for in-memory arrays it
is a few milliseconds per epoch (see docs/benchmarks.md).

The validation data is replayed the same way: `fit` builds one epoch iterator for it, at the
first validation, and each validation iterates it again, so a validation pipeline that
reshuffles (a `Dataset.shuffle` on the validation set) gives each epoch's validation another
order, and a resumed call's first validation must see the order of the validations done before
the checkpoint. Its batches are then summed in the uninterrupted run's order, which is what makes
`val_loss` equal bit for bit (the mean of the same values added in another order differs in its
last bits).
"""

from __future__ import annotations

from spotfit.runtime.keras_internals import trainer as tf_trainer
from spotfit.runtime.position import Position as Position  # where `arm` is told to resume
from spotfit.runtime.position import validations_done as validations_done

_KerasTFEpochIterator = tf_trainer.TFEpochIterator


_armed: list[Position] = []
_armed_validation: list[tuple[object, int]] = []  # (the call's validation `x`, validations done)


def arm(position: Position, validation_x: object = None, validations: int = 0) -> None:
    """The next epoch iterator that `fit` builds for its training data resumes at `position`; the
    one it builds over `validation_x`, after `validations` passes over it."""
    disarm()
    _armed.append(position)
    if validation_x is not None and validations > 0:
        _armed_validation.append((validation_x, validations))


def disarm() -> None:
    _armed.clear()
    _armed_validation.clear()


class ResumingEpochIterator(_KerasTFEpochIterator):  # type: ignore[misc,valid-type]  # resolved at import
    """A `TFEpochIterator` that, when armed, fast-forwards to a saved position on `reset()`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._resume_at = _armed.pop() if _armed else None
        if self._resume_at is None and _armed_validation and kwargs.get("x") is _armed_validation[0][0]:
            self._resume_at = Position(epoch=_armed_validation.pop()[1])
        self._skip_batches = 0
        self.replayed_batches = 0

    def reset(self):
        super().reset()
        position, self._resume_at = self._resume_at, None
        if position is None:
            return
        for _ in range(position.epoch):
            with self.catch_stop_iteration():
                for _, _, iterator in self:
                    self._draw(iterator)
        self._skip_batches = position.batch

    def __iter__(self):
        super().__iter__()
        skip, self._skip_batches = self._skip_batches, 0
        if skip:
            with self.catch_stop_iteration():
                for _ in range(skip // self.steps_per_execution):
                    _, _, iterator = next(self._epoch_iterator)
                    self._draw(iterator)
        return self

    def _draw(self, iterator) -> None:
        for _ in range(self.steps_per_execution):
            next(iterator)
            self.replayed_batches += 1


def install() -> None:
    """Make Keras's TF trainer build `ResumingEpochIterator`s."""
    tf_trainer.TFEpochIterator = ResumingEpochIterator
