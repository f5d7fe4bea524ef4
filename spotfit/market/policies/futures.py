"""Futures of spot availability sampled from the past, and what a simple policy pays in them.

A `RunModel` is the semi-Markov picture of a market that a policy may build from the history it
has seen: the lengths of the completed up and down runs (hours), the current run's state and age,
and, for several zones used together, how often a job riding spot has to hop to another zone
while some zone stays up. `sample` draws K futures as alternating runs: the current run's rest
(a past run of the same state that lasted longer than the current one, minus its age), then
runs drawn from the past ones. `play` replays the base policy in each future at the run level
(no ticks), vectorised over the futures and over a family of options for the current run
(hold the present mode for x hours of it, then change), and returns each option's mean cost.

The base policy is greedy with the deadline's safety net: spot whenever spot is up (a launch when
the slack still affords one more), wait through an outage while the slack lasts, then on-demand
to the end; on on-demand it stays through outages and returns to spot when spot comes back.

Example:

>>> import numpy as np
>>> m = RunModel(up_h=np.array([4.0, 6.0]), down_h=np.array([1.0]), up_now=False, age_h=0.5, hop_per_h=0.0)
>>> runs = m.sample(np.random.default_rng(0), k=4, horizon_h=10.0)
>>> runs.shape[0], bool((runs > 0).all())
(4, True)
>>> job = Job(time_left_h=10.0, work_left_h=8.0, overhead_h=0.2, spot_usd_per_h=1.0, on_demand_usd_per_h=3.0)
>>> holds = np.array([0.0, np.inf])  # bridge the outage on-demand now, or wait it out
>>> costs = play(job, runs, False, IDLE, 0.0, OD, holds, np.random.default_rng(0), 0.0)
>>> costs.shape, bool((costs >= 8.0).all())
((2,), True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

IDLE, SPOT, OD = 0, 1, 2
# Before a zone has history: two pseudo-runs of typical spot up and down times (the priors of
# the previous default policy, chosen on the February 2023 trace).
PRIOR_UP_H, PRIOR_DOWN_H, PRIOR_RUNS = 4.0, 1.0, 2


@dataclass(frozen=True, slots=True)
class RunModel:
    """Past up and down run lengths (hours), the current run, and the hop rate while up."""

    up_h: np.ndarray
    down_h: np.ndarray
    up_now: bool
    age_h: float
    hop_per_h: float

    def pools(self) -> tuple[np.ndarray, np.ndarray]:
        """The past runs with the prior's pseudo-runs."""
        return (np.concatenate([self.up_h, np.full(PRIOR_RUNS, PRIOR_UP_H)]),
                np.concatenate([self.down_h, np.full(PRIOR_RUNS, PRIOR_DOWN_H)]))

    def sample(self, rng: np.random.Generator, k: int, horizon_h: float) -> np.ndarray:
        """(k, n) run lengths in hours: the current run's rest, then alternating past runs."""
        ups, downs = self.pools()
        same = ups if self.up_now else downs
        longer = same[same > self.age_h]
        # A run older than any seen is expected to last as long again.
        rest = longer - self.age_h if longer.size else np.array([max(self.age_h, 1e-3)])
        cycle_h = float(ups.mean() + downs.mean())
        n = int(min(2 * np.ceil(horizon_h / cycle_h) + 6, 400))
        runs = np.empty((k, n))
        runs[:, 0] = rng.choice(rest, size=k)
        first, second = (downs, ups) if self.up_now else (ups, downs)
        runs[:, 1::2] = rng.choice(first, size=(k, runs[:, 1::2].shape[1]))
        runs[:, 2::2] = rng.choice(second, size=(k, runs[:, 2::2].shape[1]))
        return runs


@dataclass(frozen=True, slots=True)
class Job:
    """The job at a decision point, in hours and $/h."""

    time_left_h: float
    work_left_h: float
    overhead_h: float
    spot_usd_per_h: float
    on_demand_usd_per_h: float


class _Futures:
    """The job in X options × K futures, advanced run by run."""

    def __init__(self, job: Job, shape: tuple[int, int], mode: int, overhead_left_h: float):
        self.job = job
        self.t = np.full(shape, job.time_left_h)
        self.w = np.full(shape, job.work_left_h)
        self.ovl = np.full(shape, overhead_left_h)
        self.cost = np.zeros(shape)
        self.m = np.full(shape, mode)
        self.live = np.ones(shape, dtype=bool)

    def slack(self) -> np.ndarray:
        """Time to spare if on-demand were launched now."""
        return cast(np.ndarray, self.t - self.w - self.job.overhead_h)

    def launch(self, mask: np.ndarray, mode: int) -> None:
        self.m = np.where(mask, mode, self.m)
        self.ovl = np.where(mask, self.job.overhead_h, self.ovl)

    def finish_on_demand(self, mask: np.ndarray) -> None:
        self.cost += np.where(mask, self.job.on_demand_usd_per_h * (self.w + self.job.overhead_h), 0.0)
        self.live &= ~mask

    def base_policy_at(self, up: bool) -> None:
        """The base policy's move at the start of a run."""
        o = self.job.overhead_h
        if not up:
            self.m = np.where(self.m == SPOT, IDLE, self.m)  # preempted
            self.ovl = np.where(self.m == IDLE, 0.0, self.ovl)
            return
        fits = self.live & (self.slack() >= o)  # one more launch fits
        self.launch(fits & ((self.m == IDLE) | ((self.m == OD) & (self.w > 2 * o))), SPOT)
        self.finish_on_demand(self.live & (self.m == IDLE))  # no launch fits

    def advance(self, length: np.ndarray, up: bool, hops: np.ndarray | float) -> None:
        """Let `length` hours pass in the current modes (a spot ride hops `hops` times)."""
        job = self.job
        idle = self.m == IDLE
        self.finish_on_demand(self.live & idle & (length > self.slack()))  # waited past the slack
        ovl = np.where(self.m == SPOT, self.ovl + hops * job.overhead_h, self.ovl) if up else self.ovl
        gain = np.where(idle, 0.0, np.maximum(length - ovl, 0.0))
        price = np.where(self.m == SPOT, job.spot_usd_per_h, np.where(self.m == OD, job.on_demand_usd_per_h, 0.0))
        ends = self.live & ~idle & (self.w <= gain) & (length > 0)
        self.cost += np.where(ends, price * (np.minimum(ovl, length) + self.w), 0.0)
        self.live &= ~ends
        self.cost += np.where(self.live, price * length, 0.0)
        self.w = np.where(self.live, self.w - gain, self.w)
        self.t = self.t - length
        self.ovl = np.maximum(ovl - length, 0.0)


def play(job: Job, runs: np.ndarray, up_first: bool, mode: int, overhead_left_h: float, then: int,
         holds_h: np.ndarray, rng: np.random.Generator, hop_per_h: float) -> np.ndarray:
    """Mean cost (USD) of each option: `mode` for the first `holds_h[x]` hours of the current
    run, then `then` (a launch) for its rest, then the base policy over the sampled `runs`."""
    k = runs.shape[0]
    f = _Futures(job, (holds_h.size, k), mode, overhead_left_h)
    first = runs[None, :, 0]
    held = np.minimum(holds_h[:, None], first)
    hops = rng.poisson(hop_per_h * runs) if hop_per_h > 0 else np.zeros_like(runs)
    # The hops of the current run fall in its held and launched parts pro rata.
    share = np.divide(held, first, out=np.ones_like(held), where=first > 0)
    f.advance(held, up_first, np.round(hops[None, :, 0] * share))
    rest = np.where(f.live, first - held, 0.0)
    switch = (rest > 0) & (f.slack() >= job.overhead_h if then == SPOT else True)
    f.launch(switch, then)
    f.advance(np.where(switch, rest, 0.0), up_first, np.round(hops[None, :, 0] * (1 - share)))
    f.advance(np.where(switch, 0.0, rest), up_first, 0.0)
    for j in range(1, runs.shape[1]):
        if not f.live.any():
            break
        up = up_first == (j % 2 == 0)
        f.base_policy_at(up)
        f.advance(np.broadcast_to(runs[None, :, j], f.t.shape), up, hops[None, :, j])
    f.finish_on_demand(f.live)  # past the sampled horizon
    return cast(np.ndarray, f.cost.mean(axis=1))
