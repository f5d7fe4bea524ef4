"""The hollow "model": a NumPy state whose value depends on every batch it has seen, in order.

Each step mixes the batch's index into the state through a nonlinear map that does not commute,
so a resume at the wrong step, a batch skipped or seen twice, or another batch order gives
another final `weights_sha256`, as real weights would. The batch order of an epoch is a
permutation drawn from (seed, fit call, epoch), the same in every attempt, so an exact resume
continues it where the checkpoint stopped.

`reference(scenario, seed)` is the uninterrupted run's result, computed in this process: what a
hollow job must end with, however often it was interrupted.

>>> from spotfit.hollow.scenario import Scenario
>>> s = Scenario.from_dict({"epochs": 2, "steps_per_epoch": 4}, [])
>>> m = HollowModel(0)
>>> for b in (0, 1, 2): m.train_step(b)
>>> n = HollowModel(0)
>>> for b in (0, 2, 1): n.train_step(b)
>>> m.sha256() == n.sha256(), reference(s, 0)["step"], len(reference(s, 0)["weights_sha256"])
(False, 8, 64)
"""

from __future__ import annotations

import hashlib

import numpy as np

from spotfit.hollow.scenario import Scenario

SIZE = 16


class HollowModel:
    """The state: `SIZE` float64 weights, seeded."""

    def __init__(self, seed: int):
        self.weights = np.random.default_rng(seed).standard_normal(SIZE)

    def train_step(self, batch: int) -> None:
        data = np.sin(np.arange(1, SIZE + 1) * (batch + 1) * 0.37)
        self.weights = np.tanh(0.9 * self.weights + 0.5 * data + 0.1 * self.weights[::-1])

    def poison(self) -> None:
        """What a NaN loss does to real weights."""
        self.weights = np.full(SIZE, np.nan)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"weights": self.weights.copy()}

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        self.weights = np.array(arrays["weights"], dtype=np.float64)

    def sha256(self) -> str:
        return hashlib.sha256(self.weights.tobytes()).hexdigest()


def batch_order(seed: int, fit_index: int, epoch: int, steps: int, shuffle: bool) -> list[int]:
    """The order in which epoch `epoch` of fit call `fit_index` visits its `steps` batches."""
    if not shuffle:
        return list(range(steps))
    return [int(b) for b in np.random.default_rng([seed, fit_index, epoch]).permutation(steps)]


def reference(scenario: Scenario, seed: int) -> dict:
    """`step` and `weights_sha256` of the scenario trained without interruption (no store, no process)."""
    model, step = HollowModel(seed), 0
    for index, fit in enumerate(scenario.fits, start=1):
        for epoch in range(fit.epochs):
            for batch in batch_order(seed, index, epoch, fit.steps_per_epoch, scenario.shuffle):
                model.train_step(batch)
                step += 1
                if scenario.nan_at_step is not None and step >= scenario.nan_at_step:
                    model.poison()
    return {"step": step, "weights_sha256": model.sha256()}
