"""Every online policy: valid decisions only, and the deadline whenever on-demand makes it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from spotfit.errors import UsageError
from spotfit.market.policies.base import DEFAULT_POLICY, POLICIES, Policy, make_policy
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import load_trace
from tests.support.once import once_per_run
from tests.support.traces import make_trace, with_future_flipped

ONLINE = [name for name in POLICIES if name != "optimum"]


def random_trace(rng, zones, ticks):
    up = np.zeros((zones, ticks), dtype=bool)
    for z in range(zones):
        state, t = rng.random() < 0.5, 0
        while t < ticks:
            run = rng.randint(1, rng.choice([3, 10, 40]))
            up[z, t:t + run] = state
            state, t = not state, t + run
    spot = np.round(np.array([[rng.uniform(0.8, 1.9)] * ticks for _ in range(zones)]), 2)
    return make_trace(up, spot=spot, gap_s=rng.choice([60, 195]))


@pytest.mark.parametrize("name", ONLINE)
def test_registry_makes_protocol_policies(name):
    policy = make_policy(name)
    assert isinstance(policy, Policy) and policy.name == name


def test_unknown_policy_lists_valid_names():
    with pytest.raises(UsageError, match="greedy, greedy_first, mdp, on_demand, optimum, rollout, spotfit, "
                                       "uniform_progress, uniform_progress_first"):
        make_policy("cheapest")
    assert make_policy("default").name == "mdp"


@pytest.mark.parametrize("name", ONLINE)
def test_valid_choices_and_deadline_when_on_demand_makes_it(name):
    rng = random.Random(name)
    for _ in range(25):
        zones = rng.choice([1, 1, 3])
        trace = random_trace(rng, zones, 400)
        gap = trace.gap_s
        overhead = rng.choice([0, gap // 2, 3 * gap + 15])
        work = rng.randint(20, 120) * gap
        deadline = work + overhead + rng.randint(0, 60) * gap + rng.randint(0, gap)
        job = Job(work, deadline, overhead)
        policy = make_policy(name)
        for s in (0, rng.randint(1, 200)):
            run = simulate(policy, trace, job, s)  # an unavailable spot choice would raise
            assert run.met_deadline, (name, s, job)
            assert run.cost_usd <= simulate("on_demand", trace, job, s).cost_usd * 3


@pytest.mark.parametrize("name", ONLINE)
def test_policies_on_the_real_trace_meet_a_tight_deadline(name):
    trace = load_trace("aws-v100").select(["us-east-1a", "us-west-2b"])
    job = Job.from_hours(10, 10.5, 0.2)
    for s in start_ticks(trace, job, 2):
        for zones in (("us-east-1a",), ("us-west-2b",), trace.zones):
            assert simulate(name, trace, job, s, zones).met_deadline


def _bundled_runs() -> dict:
    trace = load_trace("aws-v100")
    job = Job.from_hours(10, 14, 0.2)
    runs = {}
    for s in start_ticks(trace, job, 4):
        for zones in [(z,) for z in trace.zones] + [trace.zones]:
            runs[(s, zones)] = {p: simulate(p, trace, job, s, zones)
                                for p in ("spotfit", "mdp", "optimum", "on_demand")}
    return runs


@pytest.fixture(scope="module")
def bundled_runs(tmp_path_factory) -> dict:
    """spotfit, mdp (the default), optimum and on-demand on the bundled trace: a 10 h job, 14 h
    deadline, 0.2 h start-up, from 4 start points, in each zone alone and in all 9 zones together
    (simulated by one xdist worker: tests/support/once.py)."""
    return once_per_run(tmp_path_factory, "policies-bundled-runs", _bundled_runs)


# In-sample figures: the bundled trace is the one the policy's constants were tuned on, so these
# bounds guard against regressions; they are not a measure of how the policy does elsewhere.
# Measured when written: all zones together, at most 0.43 x on-demand and 1.38 x the optimum;
# one zone alone, on average 0.65 x on-demand and 1.14 x the optimum, at worst 1.68 x.


@pytest.mark.parametrize("policy", ["spotfit", "mdp"])
def test_all_zones_cost_under_half_of_on_demand_and_near_the_optimum(bundled_runs, policy):
    multi = {key: r for key, r in bundled_runs.items() if len(key[1]) > 1}
    assert len(multi) == 4
    for (start, _), r in multi.items():
        assert r[policy].met_deadline and r["optimum"].met_deadline, start
        assert r[policy].cost_usd < 0.5 * r["on_demand"].cost_usd, (start, r[policy], r["on_demand"])
        assert r[policy].cost_usd <= 1.5 * r["optimum"].cost_usd, (start, r[policy], r["optimum"])


@pytest.mark.parametrize("policy", ["spotfit", "mdp"])
def test_one_zone_meets_every_deadline_and_saves_on_average(bundled_runs, policy):
    single = [r for key, r in bundled_runs.items() if len(key[1]) == 1]
    assert len(single) == 36
    assert all(r[policy].met_deadline for r in single)
    to_od = [r[policy].cost_usd / r["on_demand"].cost_usd for r in single]
    to_opt = [r[policy].cost_usd / r["optimum"].cost_usd for r in single]
    # spotfit's reserve never made it dearer than on-demand here; mdp bets on expectations and,
    # in 2 of these 36 windows (flaky zones: up runs of 3 to 10 ticks), lost up to 3.5%.
    assert np.mean(to_od) < 0.75 and max(to_od) <= {"spotfit": 1.0, "mdp": 1.05}[policy] + 1e-9
    assert np.mean(to_opt) < 1.25 and max(to_opt) < 1.8


@pytest.mark.parametrize("name", ["spotfit", "mdp"])
def test_policy_uses_only_the_past(name):
    trace = load_trace("aws-v100").select(["us-east-2a"])
    job = Job.from_hours(8, 9, 0.2)
    other = with_future_flipped(trace, 3000 + 100)  # ticks after the 100th tick of the run
    seen = []
    for t in (trace, other):
        policy = make_policy(name)
        decisions = []
        original = policy.decide
        policy.decide = lambda ctx, o=original, d=decisions: d.append(o(ctx)) or d[-1]
        simulate(policy, t, job, 3000)
        seen.append(decisions[:100])
    assert seen[0] == seen[1]


# Fixed windows of the out-of-sample August 2023 traces (the default policy was not tuned on
# them): every zone, 3 starts, a 24 h job at a tight and a loose deadline, 0.2 h overhead.
WINDOW_TRACES = ("aws-v100-aug-16node", "aws-v100-aug-4node")


@pytest.fixture(scope="module")
def window_costs(tmp_path_factory) -> dict:
    """(cost, deadline met) of the default policy and the baselines on fixed windows (one xdist worker's)."""
    return once_per_run(tmp_path_factory, "policies-window-costs", _window_costs)


def _window_costs() -> dict:
    costs: dict = {}
    for name in WINDOW_TRACES:
        trace = load_trace(name)
        for ratio in (1.1, 1.5):
            job = Job.from_hours(24, 24 * ratio, 0.2)
            for zone in trace.zones:
                for s in start_ticks(trace, job, 3):
                    for p in (DEFAULT_POLICY, "uniform_progress", "greedy"):
                        run = simulate(p, trace, job, s, (zone,))
                        costs[(name, ratio, zone, s, p)] = (run.cost_usd, run.met_deadline)
    return costs


@pytest.mark.parametrize("baseline", ["uniform_progress", "greedy"])
def test_default_is_cheaper_than_the_baselines_on_fixed_windows_and_misses_nothing(window_costs, baseline):
    mine = {k[:-1]: v for k, v in window_costs.items() if k[-1] == DEFAULT_POLICY}
    theirs = {k[:-1]: v for k, v in window_costs.items() if k[-1] == baseline}
    assert len(mine) == 36 and all(ok for _, ok in mine.values())
    for ratio in (1.1, 1.5):
        total = sum(c for k, (c, _) in mine.items() if k[1] == ratio)
        other = sum(c for k, (c, _) in theirs.items() if k[1] == ratio)
        assert total < other, (ratio, total, other)
