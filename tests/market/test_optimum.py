"""The optimum DP against schedules replayed through `simulate`.

Two independent references: brute force over every schedule on tiny traces, and a plain
memoised search over the simulator's states (`cheapest_schedule`) on longer hand-made and real
traces. Each reference's schedule is replayed through `simulate`, which does the accounting:
the optimum must cost what the cheapest replayed schedule costs, and that schedule must meet
the deadline.
"""

from __future__ import annotations

import functools
import itertools
import math
import random

import numpy as np
import pytest

from spotfit.market.policies.base import NONE, ON_DEMAND, BasePolicy, Decision, Kind, spot
from spotfit.market.policies.optimum import Optimum
from spotfit.market.simulator import Job, RunResult, simulate
from spotfit.market.trace import Trace, load_trace
from tests.support.traces import make_trace


class Script(BasePolicy):
    """Plays one decision per tick (the last one repeats)."""

    name = "script"

    def __init__(self, decisions):
        self.decisions = list(decisions)

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


def cheapest_schedule(trace: Trace, job: Job, start_tick: int, zones: tuple[str, ...]) -> list[Decision] | None:
    """The cheapest deadline-meeting decisions, one per tick, by exhaustive search with memo.

    Follows the simulator's rules literally (see its module doc), state by state: the tick, the
    progress, what runs and the start-up it still owes. None when no schedule meets the deadline.
    """
    gap, n = trace.gap_s, trace.n_ticks
    rows = {z: trace.zone_index(z) for z in zones}
    options = [NONE, ON_DEMAND, *(spot(z) for z in zones)]
    horizon = math.ceil(job.deadline_s / gap)

    def up(zone: str, a: int) -> bool:
        return a < n and bool(trace.available[rows[zone], a])

    def step(t: int, done: float, mode: Decision, owed: float, d: Decision):
        """(cost of tick t, finished?, next state) of decision d, or None when d is not allowed."""
        a = start_tick + t
        if d.kind is Kind.NONE:
            return 0.0, False, (t + 1, done, NONE, 0.0)
        if d.kind is Kind.SPOT and not up(d.zone, a):
            return None
        owed = owed if d == mode else job.overhead_s
        price = (trace.spot_usd_per_h[rows[d.zone], min(a, n - 1)] if d.kind is Kind.SPOT
                 else min(trace.on_demand_usd_per_h[r, min(a, n - 1)] for r in rows.values()))
        pay = min(owed, gap)
        if done + gap - pay >= job.work_s - 1e-9:
            finish_s = t * gap + pay + (job.work_s - done)
            return (price * gap / 3600.0, True, None) if finish_s <= job.deadline_s + 1e-6 else None
        return price * gap / 3600.0, False, (t + 1, done + gap - pay, d, owed - pay)

    def arrive(t: int, done: float, mode: Decision, owed: float):
        """The state the policy sees at tick t: a spot instance whose zone went down is gone."""
        if mode.kind is Kind.SPOT and not up(mode.zone, start_tick + t):
            return t, done, NONE, 0.0
        return t, done, mode, owed

    @functools.cache
    def cost(t: int, done: float, mode: Decision, owed: float) -> float:
        if t >= horizon:
            return math.inf
        best = math.inf
        for d in options:
            out = step(t, done, mode, owed, d)
            if out is not None:
                best = min(best, out[0] + (0.0 if out[1] else cost(*arrive(*out[2]))))
        return best

    state = arrive(0, 0.0, NONE, 0.0)
    if math.isinf(cost(*state)):
        return None
    schedule = []
    while True:  # walk forward along a cheapest choice
        for d in options:
            out = step(*state, d)
            if out is not None and math.isclose(out[0] + (0.0 if out[1] else cost(*arrive(*out[2]))),
                                                cost(*state), rel_tol=1e-12, abs_tol=1e-12):
                break
        schedule.append(d)
        if out[1]:
            return schedule
        state = arrive(*out[2])


def replay(schedule: list[Decision], trace: Trace, job: Job, start_tick: int, zones) -> RunResult:
    return simulate(Script([*schedule, NONE]), trace, job, start_tick, zones)


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


def _check_against_replay(trace: Trace, job: Job, start_tick: int, zones: tuple[str, ...]) -> RunResult:
    run = Optimum().solve(trace, job, start_tick, zones)
    schedule = cheapest_schedule(trace, job, start_tick, zones)
    assert schedule is not None and run.met_deadline
    replayed = replay(schedule, trace, job, start_tick, zones)
    assert replayed.met_deadline, replayed
    assert run.cost_usd == pytest.approx(replayed.cost_usd, rel=1e-9), (run, replayed)
    assert run.finish_h <= job.deadline_s / 3600 + 1e-9
    return replayed


def test_a_long_outage_is_bridged_on_demand_at_the_replayed_cost():
    # One zone that goes down for a long stretch: waiting it out misses the deadline.
    trace = make_trace([[1] * 10 + [0] * 10 + [1] * 20], gap_s=60)
    job = Job(work_s=25 * 60, deadline_s=30 * 60, overhead_s=60)
    replayed = _check_against_replay(trace, job, 0, trace.zones)
    assert replayed.on_demand_h > 0 and replayed.spot_h > 0 and replayed.launches >= 2


@pytest.mark.parametrize("seed", range(6))
def test_optimum_costs_what_the_cheapest_replayed_schedule_costs(seed):
    rng = random.Random(100 + seed)
    zones = rng.choice([1, 2])
    ticks = 30
    up = np.zeros((zones, ticks + 5), dtype=bool)
    for z in range(zones):
        t, state = 0, True
        while t < up.shape[1]:
            run = rng.randint(1, 8)
            up[z, t:t + run] = state
            t, state = t + run, not state
    trace = make_trace(up, spot=np.round(np.array([[rng.uniform(0.8, 1.6)] * up.shape[1] for _ in range(zones)]), 2),
                       gap_s=rng.choice([60, 195]))
    gap = trace.gap_s
    overhead = rng.choice([0, gap // 3, gap + 30])
    deadline = ticks * gap - rng.randint(0, gap)
    job = Job(round(rng.uniform(0.4, 0.8) * (deadline - overhead)), deadline, overhead)
    _check_against_replay(trace, job, 0, trace.zones)


@pytest.mark.parametrize("zones, start_tick", [(("us-east-1a",), 581), (("us-east-1a", "us-west-2c"), 581),
                                               (("us-east-2b",), 798)])
def test_optimum_on_the_real_trace_costs_what_its_replayed_schedule_costs(zones, start_tick):
    # us-east-1a flaps from tick 581 (up 8, down 3, up 3, down 4, up 3, down 6, ... ticks of 195 s).
    trace = load_trace("aws-v100")
    job = Job.from_hours(work_h=1.2, deadline_h=2.0, overhead_h=0.2)
    _check_against_replay(trace, job, start_tick, zones)
