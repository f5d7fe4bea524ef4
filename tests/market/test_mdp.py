"""The `mdp` policy: its run model counts what the past shows, its program prices what a certain
market would cost, and its choices follow the slack: short outages are waited out, outages that
the slack cannot afford are bridged on on-demand."""

from __future__ import annotations

import numpy as np
import pytest

from spotfit.market.policies.base import Kind, make_policy
from spotfit.market.policies.mdp import _B, _IDLE, _SPOT, _end_chances, _solve, _transitions
from spotfit.market.simulator import Job, simulate
from tests.support.traces import make_trace

# Phases: s = up * _B + age bucket; a run in its first tick is in bucket 0.
UP0, DOWN0 = _B, 0


def test_end_chances_grow_where_runs_end():
    short = _end_chances(np.array([2] * 20), None, prior_ticks=50.0, k=1)
    long = _end_chances(np.array([40] * 20), None, prior_ticks=50.0, k=1)
    # With one-tick steps bucket 1 is a run's second tick: runs of 2 ticks nearly all end
    # there, runs of 40 ticks almost never.
    assert short[1] > 0.9 and long[1] < 0.05
    assert 0.0 <= short.min() and short.max() <= 1.0


def test_transitions_are_a_stochastic_matrix():
    trans = _transitions(_end_chances(np.array([3, 7, 30]), 4, 40.0, 2),
                         _end_chances(np.array([1, 2, 9]), None, 10.0, 2), 2)
    assert trans.shape == (2 * _B, 2 * _B)
    assert np.allclose(trans.sum(axis=1), 1.0) and (trans >= 0).all()


def _certain(up: bool) -> np.ndarray:
    """A market that never changes: every phase stays in its state (and ages)."""
    never = np.zeros(_B)
    trans = _transitions(never, never, 1)
    assert not trans[:_B, _B:].any() and not trans[_B:, :_B].any()
    return trans


@pytest.mark.parametrize("overhead", [0.5, 2.0])
def test_program_prices_a_certain_market(overhead):
    spot_usd, od_usd, work = 1.0, 3.0, 10
    value = _solve(40, work + 5, overhead, _certain(True), spot_usd, od_usd)
    # Spot never ends: one launch, then the work, all at the spot price.
    assert value[40, _IDLE, work, UP0] == pytest.approx(spot_usd * (work + overhead))
    # Already on spot: the work alone.
    assert value[40, _SPOT, work, UP0] == pytest.approx(spot_usd * work)
    # Spot never comes: on-demand, one launch.
    assert value[40, _IDLE, work, DOWN0] == pytest.approx(od_usd * (work + overhead))
    # Too little time for even on-demand: the program adds a penalty per step left unfinished,
    # above what on-demand in time would have cost.
    assert value[work, _IDLE, work, DOWN0] > od_usd * (work + overhead)


@pytest.mark.parametrize(("down_ticks", "deadline_h", "bridged"), [
    (5, 3.0, False),  # 5-minute outages, an hour of slack: wait, then spot; no on-demand
    (120, 2.5, True),  # 2-hour outages, half an hour of slack: bridge on on-demand
])
def test_outages_are_waited_out_only_when_the_slack_affords_them(down_ticks, deadline_h, bridged):
    cycle = [1] * 40 + [0] * down_ticks
    history = cycle * (6000 // len(cycle)) + [1] * 40  # ends in an up run: the outage starts with the job
    trace = make_trace([history + [0] * down_ticks + [1] * 400], spot=1.0, on_demand=3.0, gap_s=60)
    policy = make_policy("mdp")
    seen: list[Kind] = []
    decide = policy.decide
    policy.decide = lambda ctx: seen.append((d := decide(ctx)).kind) or d  # type: ignore[method-assign]
    run = simulate(policy, trace, Job.from_hours(2.0, deadline_h, 0.1), len(history))
    assert run.met_deadline
    path = "".join(k.value[0] for k in seen)
    if bridged:  # on-demand before the outage ends, for most of the work
        assert Kind.ON_DEMAND in seen[:down_ticks] and run.on_demand_h > 1.5, path
    else:
        assert run.on_demand_h == 0 and seen[0] is Kind.NONE and Kind.SPOT in seen, path
