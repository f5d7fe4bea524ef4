"""The optimum DP equals brute force over every schedule on tiny traces."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from market_helpers import make_trace

from spotfit.market.policies.base import NONE, ON_DEMAND, BasePolicy, Kind, spot
from spotfit.market.policies.optimum import Optimum
from spotfit.market.simulator import Job, simulate


class Script(BasePolicy):
    name = "script"

    def __init__(self, decisions):
        self.decisions = decisions

    def decide(self, ctx):
        return self.decisions[min(int(round(ctx.now_s / ctx.gap_s)), len(self.decisions) - 1)]


def brute_force(trace, job):
    options = [NONE, ON_DEMAND] + [spot(z) for z in trace.zones]
    ticks = math.ceil(job.deadline_s / trace.gap_s)
    best = None
    for seq in itertools.product(options, repeat=ticks):
        if any(d.kind is Kind.SPOT and not trace.available[trace.zone_index(d.zone), t]
               for t, d in enumerate(seq)):
            continue
        run = simulate(Script([*seq, ON_DEMAND]), trace, job)
        if run.met_deadline and (best is None or run.cost_usd < best):
            best = run.cost_usd
    return best


@pytest.mark.parametrize("seed", range(12))
def test_optimum_matches_brute_force(seed):
    rng = random.Random(seed)
    zones = 1 if seed % 2 else 2
    ticks = 6 if zones == 1 else 4
    gap = rng.choice([60, 100])
    overhead = rng.choice([0, 30, 60, 150])
    shape = (zones, ticks + 2)
    trace = make_trace(np.array([[rng.random() < 0.6 for _ in range(shape[1])] for _ in range(zones)]),
                       spot=np.array([[rng.choice([1.0, 1.5, 2.0]) for _ in range(shape[1])]
                                      for _ in range(zones)]), gap_s=gap)
    deadline = ticks * gap - rng.choice([0, 10, 45])
    job = Job(rng.uniform(0.3, 0.95) * (deadline - overhead), deadline, overhead)
    expected = brute_force(trace, job)
    run = Optimum().solve(trace, job, 0, trace.zones)
    if expected is None:
        assert not run.met_deadline
    else:
        assert run.met_deadline and run.cost_usd == pytest.approx(expected, rel=1e-9)


def test_optimum_figures_match_a_replay_of_its_choice():
    # One zone that goes down for a long stretch: the optimum bridges it on-demand once.
    trace = make_trace([[1] * 10 + [0] * 10 + [1] * 20], gap_s=60)
    job = Job(work_s=25 * 60, deadline_s=30 * 60, overhead_s=60)
    run = Optimum().solve(trace, job, 0, trace.zones)
    assert run.met_deadline and run.launches >= 2
    assert run.cost_usd == pytest.approx((run.spot_h * 1.0 + run.on_demand_h * 3.0))
