"""Exact data position on a Keras 2 resume: the interrupted call's batches drawn again.

Keras 2's `fit` takes its batches from a `DataHandler`: `enumerate_epochs` yields an iterator
per epoch (a new one each epoch for a finite `tf.data` pipeline, whose `shuffle` reshuffles per
iteration; one for a generator), and a `Sequence`'s `on_epoch_end` (often a reshuffle) runs
after each epoch. As on Keras 3 (runtime/resume.py), the only way to stand at the same place in
the same order is to draw the same batches again without training on them: `ResumingDataHandler`
runs the call's epochs from its `initial_epoch`, drawing the whole epochs before the checkpoint
and the checkpoint's batches of its epoch, then yields from there. `fit` learns the epoch and
batch to count from through `Model._maybe_load_initial_counters_from_ckpt`, its own hook for
BackupAndRestore, which returns the armed position.

The data's own randomness is drawn again as it was: a `Sequence`'s batch order (Python's RNG,
drawn when the epoch's iterator starts) and a `Sequence`'s `on_epoch_end` (often NumPy's global
RNG) draw, in an uninterrupted run, from the RNG states the script had when it called `fit`. The
replay therefore runs from those states (recorded by `arm`, when the call begins: the script ran
the same lines before it), and then puts back the checkpoint's states, which the main callback
restored in `on_train_begin`, for training to go on from.

Not replayed on Keras 2: a validation set's reshuffles (their order changes `val_*` metrics' last
bits, not the weights).
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import tensorflow as tf

from spotfit.runtime.keras2.internals import data_adapter, training
from spotfit.runtime.position import Position

_KerasDataHandler = data_adapter.DataHandler
_original_counters = training.Model._maybe_load_initial_counters_from_ckpt

_armed: list[tuple[Position, Any]] = []  # the next training DataHandler's position, and the RNG states at the call
_counters: list[tuple[int, int]] = []  # (epoch, batch) that fit counts from, once its handler armed


def arm(position: Position, validation_x: object = None, validations: int = 0) -> None:
    """The next `DataHandler` that `fit` builds resumes at `position` (the validation set is not replayed)."""
    disarm()
    _armed.append((position, _rng_states()))


def disarm() -> None:
    _armed.clear()
    _counters.clear()


class ResumingDataHandler(_KerasDataHandler):  # type: ignore[misc,valid-type]  # resolved at import
    """A `DataHandler` that, when armed, draws the batches before the saved position again."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._call_initial_epoch = self._initial_epoch
        self._resume_at: Position | None = None
        self._call_rng: Any = None
        if _armed:
            self._resume_at, self._call_rng = _armed.pop()
        self.replayed_batches = 0
        if self._resume_at is not None:
            _counters.append((self._initial_epoch + self._resume_at.epoch, self._resume_at.batch))

    def enumerate_epochs(self):
        position, self._resume_at = self._resume_at, None
        if position is None:
            yield from super().enumerate_epochs()
            return
        resume_epoch = self._call_initial_epoch + position.epoch
        restored = _rng_states()  # the checkpoint's (the main callback's on_train_begin)
        _set_rng_states(self._call_rng)
        # Keras's loop (tf_keras/src/engine/data_adapter.py, DataHandler.enumerate_epochs), from
        # the call's own first epoch: the same iterators are made, in the same order.
        with self._truncate_execution_to_epoch():
            data_iterator = iter(self._dataset)
            for epoch in range(self._call_initial_epoch, self._epochs):
                if self._insufficient_data:
                    break
                if epoch == resume_epoch and not position.batch:  # at an epoch's start: before its order is drawn
                    _set_rng_states(restored)
                if self._adapter.should_recreate_iterator():
                    data_iterator = iter(self._dataset)
                    if not isinstance(self._dataset, data_adapter.DistributedDataset):
                        steps = self._infer_steps(self._steps_per_epoch, self._dataset)
                        if steps is not None:
                            self._inferred_steps = steps
                if epoch < resume_epoch:
                    self._draw(data_iterator, self._inferred_steps)
                else:
                    if epoch == resume_epoch and position.batch:
                        self._draw(data_iterator, position.batch)
                        _set_rng_states(restored)
                    yield epoch, data_iterator
                self._adapter.on_epoch_end()

    def _draw(self, iterator, batches: int | None) -> None:
        """Draw `batches` batches (None: until the data ends, which sets the epoch's size as Keras does)."""
        drawn = 0
        try:
            for _ in (range(batches) if batches is not None else itertools.count()):
                next(iterator)
                drawn += 1
        except (StopIteration, tf.errors.OutOfRangeError):
            if batches is not None:
                raise
            self._inferred_steps = drawn
        self.replayed_batches += drawn


def _rng_states() -> tuple:
    return random.getstate(), np.random.get_state()


def _set_rng_states(states: tuple) -> None:
    random.setstate(states[0])
    np.random.set_state(states[1])


def _counters_from_position(self, steps_per_epoch, initial_epoch):
    """`fit`'s first epoch and batch: the armed position's, else Keras's own answer."""
    if _counters:
        return _counters.pop()
    return _original_counters(self, steps_per_epoch, initial_epoch)


def install() -> None:
    """Make Keras 2's `fit` build `ResumingDataHandler`s and count from their position."""
    data_adapter.DataHandler = ResumingDataHandler
    training.Model._maybe_load_initial_counters_from_ckpt = _counters_from_position
