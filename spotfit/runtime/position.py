"""Where a resumed `fit` call stands in its data: the position both Keras versions' replays draw to.

Keras 3's epoch iterator (resume.py) and Keras 2's `DataHandler` (keras2/resume.py) are armed
with a `Position`; this module imports no Keras, so that a Keras 2 attempt does not load Keras 3.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Position:
    """Where training stands: epochs completed, and batches done in the current epoch."""

    epoch: int = 0
    batch: int = 0


def validations_done(epochs: int, initial_epoch: int, validation_freq) -> int:
    """How many of a call's first `epochs` epochs validated, as Keras's `_should_eval` decides.

    >>> validations_done(3, 0, 1), validations_done(5, 0, 2), validations_done(3, 1, [2, 4])
    (3, 2, 2)
    """
    def validates(epoch: int) -> bool:
        if isinstance(validation_freq, int):
            return (epoch + 1) % validation_freq == 0
        return epoch + 1 in validation_freq

    return sum(validates(e) for e in range(initial_epoch, initial_epoch + epochs))
