"""Every online policy: valid decisions only, and the deadline whenever on-demand makes it."""

from __future__ import annotations

import random

import numpy as np
import pytest
from market_helpers import make_trace

from spotfit.errors import UsageError
from spotfit.market.policies.base import POLICIES, Policy, make_policy
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import load_trace

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
    with pytest.raises(UsageError, match="greedy, on_demand, optimum, spotfit, uniform_progress"):
        make_policy("cheapest")
    assert make_policy("default").name == "spotfit"


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


def test_spotfit_uses_only_the_past():
    trace = load_trace("aws-v100").select(["us-east-2a"])
    job = Job.from_hours(8, 9, 0.2)
    future_changed = trace.available.copy()
    cut = 3000 + 100  # ticks after the 100th tick of the run
    future_changed[:, cut:] = ~future_changed[:, cut:]
    other = type(trace)(trace.zones, trace.gap_s, trace.start, future_changed,
                        trace.spot_usd_per_h, trace.on_demand_usd_per_h)
    seen = []
    for t in (trace, other):
        policy = make_policy("spotfit")
        decisions = []
        original = policy.decide
        policy.decide = lambda ctx, o=original, d=decisions: d.append(o(ctx)) or d[-1]
        simulate(policy, t, job, 3000)
        seen.append(decisions[:100])
    assert seen[0] == seen[1]
