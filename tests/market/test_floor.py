"""The default policy's floor (`market.max_overpay`): whatever the market does, the job pays at
most (1 + max_overpay) × all-on-demand (prices known when billed, on-demand steady), without
missing a deadline that on-demand makes; and the floor costs nothing where spot goes well."""

from __future__ import annotations

import math
import random

import pytest

from spotfit.market.policies.base import DEFAULT_MAX_OVERPAY, DEFAULT_POLICY
from spotfit.market.simulator import Job, simulate
from spotfit.spec.job import Market
from tests.market.test_policies import random_trace
from tests.support.traces import make_trace


@pytest.mark.parametrize("max_overpay", [0.0, 0.05])
def test_the_default_policy_never_pays_more_than_the_floor_on_random_markets(max_overpay):
    rng = random.Random(f"floor-{max_overpay}")
    above_without = 0
    for _ in range(30):
        trace = random_trace(rng, rng.choice([1, 1, 3]), 300)
        gap = trace.gap_s
        overhead = rng.choice([0, gap // 2, 3 * gap + 15])
        work = rng.randint(10, 60) * gap
        job = Job(work, work + overhead + rng.randint(0, 60) * gap, overhead, max_overpay)
        start = rng.randint(0, 100)
        run = simulate(DEFAULT_POLICY, trace, job, start)
        on_demand = simulate("on_demand", trace, job, start).cost_usd
        assert run.met_deadline
        assert run.cost_usd <= (1 + max_overpay) * on_demand + 1e-9, (job, start, run, on_demand)
        unbounded = Job(job.work_s, job.deadline_s, job.overhead_s, math.inf)
        above_without += simulate(DEFAULT_POLICY, trace, unbounded, start).cost_usd > (1 + max_overpay) * on_demand
    assert above_without >= 1  # not vacuous: without the floor some of these markets cost more


def test_without_a_floor_a_flapping_zone_costs_more_than_on_demand_and_with_it_never():
    # Spot ($1/h, on-demand $3/h) up for one tick in three: each launch pays its 2-tick start-up
    # and is preempted before any progress. The floor stops launching once a launch could push
    # the bill past the bound; the job then finishes on on-demand.
    trace = make_trace([[1, 0, 0] * 200], spot=1.0, on_demand=3.0, gap_s=60)
    runs = {}
    for bound in (math.inf, 0.05):
        job = Job(30 * 60.0, 300 * 60.0, 120.0, bound)
        runs[bound] = simulate(DEFAULT_POLICY, trace, job, 0)
    on_demand = simulate("on_demand", trace, Job(30 * 60.0, 300 * 60.0, 120.0), 0).cost_usd
    assert all(r.met_deadline for r in runs.values())
    assert runs[0.05].cost_usd <= 1.05 * on_demand + 1e-9
    assert runs[0.05].cost_usd <= runs[math.inf].cost_usd


def test_the_floor_leaves_a_steady_spot_market_alone_and_0_never_bets():
    trace = make_trace([[1] * 300], spot=1.0, on_demand=3.0, gap_s=60)
    costs = {b: simulate(DEFAULT_POLICY, trace, Job(60 * 60.0, 90 * 60.0, 120.0, b), 0).cost_usd
             for b in (math.inf, 0.0, 0.05)}
    on_demand = simulate("on_demand", trace, Job(3600.0, 5400.0, 120.0), 0).cost_usd
    assert costs[0.05] == costs[math.inf] < on_demand
    # 0: a spot start-up is billed before any progress, so the job never risks one.
    assert costs[0.0] == on_demand


def test_the_spec_default_is_the_policy_default():
    assert Market().max_overpay == DEFAULT_MAX_OVERPAY == Job(1.0, 2.0, 0.0).max_overpay


def _mixed_history_trace(future: list[int]):
    # Ten cycles of a long up run (40 ticks) and a short one (2 ticks), 5 ticks down between: at a
    # fresh up run's first tick, half the runs like it ended within 2 ticks (before a 2-tick
    # start-up pays for itself); past 2 ticks, none did.
    return make_trace([([1] * 40 + [0] * 5 + [1] * 2 + [0] * 5) * 10 + future], spot=1.0, on_demand=3.0, gap_s=60)


def _context(trace, tick: int, job: Job):
    from spotfit.market.policies.base import NONE, Context
    from spotfit.market.view import MarketView

    return Context(0.0, trace.gap_s, job.work_s, 0.0, job.deadline_s, job.overhead_s, NONE, 0.0,
                   MarketView.of_trace(trace, tick), trace.zones, False, 0.0, job.max_overpay)


def test_the_chance_bound_skips_a_launch_the_zones_past_says_is_likely_lost():
    from spotfit.market.policies.floor import MAX_LOSS_CHANCE, loss_chance, risk_ok

    job = Job(30 * 60.0, 120 * 60.0, 120.0, DEFAULT_MAX_OVERPAY)
    short_now = _mixed_history_trace([1] * 2 + [0] * 5 + [1] * 200)  # this run is a short one
    long_now = _mixed_history_trace([1] * 207)  # this run lasts
    start = 520
    # Online: at the run's first tick both futures read the same, and the launch is too risky.
    chances = {loss_chance(_context(t, start, job), "z0", 3) for t in (short_now, long_now)}
    assert len(chances) == 1 and chances.pop() > MAX_LOSS_CHANCE
    assert not risk_ok(_context(short_now, start, job), "z0", job.overhead_s)
    # Two ticks on, the runs that lasted that long all lasted: the launch is made.
    assert risk_ok(_context(long_now, start + 2, job), "z0", job.overhead_s)
    unbounded = Job(job.work_s, job.deadline_s, job.overhead_s, math.inf)
    on_demand = simulate("on_demand", short_now, job, start).cost_usd
    runs = {b.max_overpay: simulate(DEFAULT_POLICY, short_now, b, start) for b in (job, unbounded)}
    assert all(r.met_deadline for r in runs.values())
    # Without the floor the job launches into the short run and loses the start-up; with it, it
    # waits for a run that has lasted, and pays less.
    assert runs[math.inf].preemptions >= 1 and runs[DEFAULT_MAX_OVERPAY].preemptions == 0
    assert runs[DEFAULT_MAX_OVERPAY].cost_usd < runs[math.inf].cost_usd < on_demand
    steady = simulate(DEFAULT_POLICY, long_now, job, start)
    assert steady.met_deadline and steady.cost_usd < on_demand


def _switch_context(trace, tick: int, job: Job, mode):
    from spotfit.market.policies.base import Context
    from spotfit.market.view import MarketView

    return Context(0.0, trace.gap_s, job.work_s, 0.0, job.deadline_s, job.overhead_s, mode, 0.0,
                   MarketView.of_trace(trace, tick), trace.zones, False, 0.0, job.max_overpay)


def test_a_switch_off_on_demand_without_evidence_waits_for_the_runs_own_age():
    from spotfit.market.policies.base import NONE, ON_DEMAND
    from spotfit.market.policies.floor import MAX_LOSS_CHANCE, loss_chance, risk_ok

    # Spot down for the first 30 ticks of the trace, then up: no completed up run to read.
    trace = make_trace([[0] * 30 + [1] * 400], spot=1.0, on_demand=3.0, gap_s=60)
    job = Job(60 * 60.0, 200 * 60.0, 120.0, DEFAULT_MAX_OVERPAY)
    young, old = 30, 30 + 120  # the run's first tick, and two hours on
    # From idle the launch risks its start-up alone, and the prior's chance lets it go.
    assert risk_ok(_switch_context(trace, young, job, NONE), "z0", job.overhead_s)
    # Off on-demand, the scale-free chance: a run 1 tick old ends within 9 more with chance 9/10.
    assert loss_chance(_switch_context(trace, young, job, ON_DEMAND), "z0", 10) == pytest.approx(0.9)
    assert not risk_ok(_switch_context(trace, young, job, ON_DEMAND), "z0", job.overhead_s)
    # The run's own age is the evidence: two hours on, the switch is made.
    assert loss_chance(_switch_context(trace, old, job, ON_DEMAND), "z0", 10) < MAX_LOSS_CHANCE
    assert risk_ok(_switch_context(trace, old, job, ON_DEMAND), "z0", job.overhead_s)


def test_a_switch_off_on_demand_with_evidence_reads_the_zones_past():
    from spotfit.market.policies.base import ON_DEMAND
    from spotfit.market.policies.floor import loss_chance

    # Past up runs of 40 ticks: a 1-tick-old run has evidence, and none of them ended within 9 ticks.
    trace = make_trace([([1] * 40 + [0] * 5) * 10 + [1] * 100], spot=1.0, on_demand=3.0, gap_s=60)
    ctx = _switch_context(trace, 450, Job(3600.0, 7200.0, 120.0, DEFAULT_MAX_OVERPAY), ON_DEMAND)
    assert ctx.market.run_ticks("z0") == 1
    assert loss_chance(ctx, "z0", 10) < 0.1


def test_the_job_waits_for_a_run_to_prove_itself_only_while_a_launch_would_still_fit():
    from spotfit.market.policies.base import Kind, make_policy

    # At a fresh run's first tick the chance bound holds the launch back; two ticks on it lets it
    # go (test above). A launch after the wait needs its 2-tick start-up on top of the on-demand
    # fallback's: with 5 ticks of slack the job waits idle for the run to prove itself, with 3 a
    # launch no longer fits after 2 ticks of waiting, which would only spend the slack, and it
    # takes on-demand at once.
    trace = _mixed_history_trace([1] * 207)
    first, cost = {}, {}
    for slack_ticks in (5, 3):
        job = Job(30 * 60.0, (30 + 2 + slack_ticks) * 60.0, 120.0, DEFAULT_MAX_OVERPAY)
        policy = make_policy(DEFAULT_POLICY)
        policy.reset()
        first[slack_ticks] = policy.decide(_context(trace, 520, job)).kind
        run = simulate(DEFAULT_POLICY, trace, job, 520)
        assert run.met_deadline
        cost[slack_ticks] = run.cost_usd / simulate("on_demand", trace, job, 520).cost_usd
    assert first == {5: Kind.NONE, 3: Kind.ON_DEMAND}
    assert cost[5] < 0.5 and cost[3] == pytest.approx(1.0)  # the wait paid off; no room: on-demand

