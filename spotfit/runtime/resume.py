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
"""

from __future__ import annotations

from dataclasses import dataclass

from keras.src.backend.tensorflow import trainer as tf_trainer

_KerasTFEpochIterator = tf_trainer.TFEpochIterator


@dataclass
class Position:
    """Where training stands: epochs completed, and batches done in the current epoch."""

    epoch: int = 0
    batch: int = 0


_armed: list[Position] = []


def arm(position: Position) -> None:
    """The next epoch iterator that `fit` builds for its training data resumes at `position`."""
    _armed.clear()
    _armed.append(position)


def disarm() -> None:
    _armed.clear()


class ResumingEpochIterator(_KerasTFEpochIterator):  # type: ignore[misc,valid-type]  # resolved at import
    """A `TFEpochIterator` that, when armed, fast-forwards to a saved position on `reset()`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._resume_at = _armed.pop() if _armed else None
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
