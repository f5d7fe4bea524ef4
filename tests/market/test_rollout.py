"""The rollout policy and its futures: hand-computed costs of the base policy, deterministic
decisions, and decisions that use only the past."""

from __future__ import annotations

import numpy as np
import pytest

from spotfit.market.policies.base import make_policy
from spotfit.market.policies.futures import IDLE, OD, SPOT, Job, RunModel, play
from spotfit.market.simulator import Job as SimJob
from spotfit.market.simulator import simulate
from spotfit.market.trace import load_trace
from tests.support.traces import with_future_flipped

JOB = Job(time_left_h=4.0, work_left_h=2.0, overhead_h=0.2, spot_usd_per_h=1.0, on_demand_usd_per_h=3.0)
RNG = np.random.default_rng(0)


def test_play_bridging_and_waiting_an_outage_by_hand():
    runs = np.array([[0.5, 10.0]])  # the outage's rest, then a long up run
    bridge, wait = play(JOB, runs, False, IDLE, 0.0, OD, np.array([0.0, np.inf]), RNG, 0.0)
    # bridge: on-demand 0.5 h (0.2 h start-up, 0.3 h of work) $1.5, then spot 0.2 h + 1.7 h $1.9
    assert bridge == pytest.approx(3.4)
    assert wait == pytest.approx(2.2)  # wait, then spot: 0.2 h start-up + 2 h of work


def test_play_waiting_past_the_slack_ends_on_demand():
    tight = Job(time_left_h=2.3, work_left_h=2.0, overhead_h=0.2, spot_usd_per_h=1.0, on_demand_usd_per_h=3.0)
    (wait,) = play(tight, np.array([[0.5, 10.0]]), False, IDLE, 0.0, OD, np.array([np.inf]), RNG, 0.0)
    assert wait == pytest.approx(3.0 * 2.2)  # 0.1 h of slack: on-demand for all the work + start-up


def test_play_switching_to_spot_for_a_short_run_costs_more_than_staying():
    runs = np.array([[0.25, 3.0, 10.0]])  # a short up run, a long outage, a long up run
    on_demand = 3.0 * JOB.work_left_h
    switch, stay = play(JOB, runs, True, OD, 0.0, SPOT, np.array([0.0, np.inf]), RNG, 0.0)
    assert stay == pytest.approx(on_demand)  # stays through the up run and the outage: done
    assert switch > stay  # 0.05 h of spot work, then 3 h of outage: the slack is gone


def test_sampled_futures_start_with_the_current_runs_rest_then_alternate():
    model = RunModel(up_h=np.array([1.0, 5.0, 9.0]), down_h=np.array([0.5]), up_now=True, age_h=4.0, hop_per_h=0.0)
    runs = model.sample(np.random.default_rng(1), k=200, horizon_h=20.0)
    # Up runs longer than 4 h: 5 h and 9 h (the prior's 4 h runs are not longer): 1 h or 5 h left.
    assert set(runs[:, 0]) == {1.0, 5.0}
    assert set(runs[:, 1::2].ravel()) == {0.5, 1.0}  # past and prior down runs
    assert set(runs[:, 2::2].ravel()) <= {1.0, 5.0, 9.0, 4.0}


def _decisions(trace, job, start):
    policy = make_policy("rollout")
    seen: list = []
    decide = policy.decide
    policy.decide = lambda ctx: seen.append(decide(ctx)) or seen[-1]  # type: ignore[method-assign]
    simulate(policy, trace, job, start)
    return seen


def test_rollout_is_deterministic_and_uses_only_the_past():
    trace = load_trace("aws-v100").select(["us-east-2a"])
    job = SimJob.from_hours(8, 9, 0.2)
    other = with_future_flipped(trace, 3000 + 100)  # ticks after the 100th tick of the run
    first = _decisions(trace, job, 3000)
    assert first == _decisions(trace, job, 3000)
    assert first[:100] == _decisions(other, job, 3000)[:100]
