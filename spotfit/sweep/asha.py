"""Asynchronous successive halving (ASHA) over epochs, as pure functions of the rung values.

A trial pauses at each rung epoch (1, 3, 9, ...: `MIN_EPOCHS` · `REDUCTION_FACTOR`**k) unless
its value there is in the top `1 / REDUCTION_FACTOR` of the values the rung has seen so far; a
paused trial is promoted later, when enough other trials have reached its rung for it to be in
that top share, or when the sweep has nothing else left to run and it is its rung's best.
spotfit pauses a trial on a checkpoint, so a promotion resumes it where it stopped; Optuna's
`SuccessiveHalvingPruner` cannot suspend a trial, and promotes the first trials of a rung
instead of pausing them. Trials still paused when nothing can promote them any more are pruned.

Example:

>>> [e for e in range(1, 30) if is_rung(e)]
[1, 3, 9, 27]
>>> promotable({0: 0.9, 1: 0.5, 2: 0.7}, 0, "max"), promotable({0: 0.9, 1: 0.5, 2: 0.7}, 2, "max")
(True, False)
>>> promotable({0: 0.9}, 0, "max")  # one value: nothing to compare with yet
False
>>> promotable({0: 0.9}, 0, "max", final=True)  # and nothing more will come
True
"""

from __future__ import annotations

MIN_EPOCHS = 1  # the first rung
REDUCTION_FACTOR = 3  # a rung keeps the best third


def is_rung(epoch: int) -> bool:
    """Whether `epoch` is a rung (for any length of training)."""
    while epoch > MIN_EPOCHS and epoch % REDUCTION_FACTOR == 0:
        epoch //= REDUCTION_FACTOR
    return epoch == MIN_EPOCHS


def promotable(values: dict[int, float], trial: int, mode: str, final: bool = False) -> bool:
    """Whether `trial` is in the top `len(values) // REDUCTION_FACTOR` of its rung's `values`.

    `final`: no trial can reach the rung any more, so its best one goes on even when the rung
    holds fewer than `REDUCTION_FACTOR` values (a sweep always finishes a trial).
    """
    keep = max(len(values) // REDUCTION_FACTOR, 1 if final else 0)
    best_first = sorted(values, key=lambda t: (-values[t] if mode == "max" else values[t], t))
    return trial in best_first[:keep]
