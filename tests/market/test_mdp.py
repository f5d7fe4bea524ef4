"""The `mdp` policy: its run model counts what the past shows, its program prices what a certain
market would cost, and its choices follow the slack: short outages are waited out, outages that
the slack cannot afford are bridged on on-demand."""

from __future__ import annotations

import numpy as np
import pytest

from spotfit.market.policies.base import NONE, Context, Kind, make_policy
from spotfit.market.policies.mdp import _B, _IDLE, _SPOT, _end_chances, _solve, _transitions, _union_runs
from spotfit.market.simulator import Job, simulate
from spotfit.market.view import MarketView
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


def _decisions(policy):
    """Wrap `policy.decide` to record every decision."""
    seen: list = []
    decide = policy.decide
    policy.decide = lambda ctx: seen.append(d := decide(ctx)) or d  # type: ignore[method-assign]
    return seen


def test_a_spot_launch_that_could_not_finish_its_start_up_is_not_made():
    # Spot has been up for days and stays up; 0.3 h of slack over on-demand's 1 h + 0.2 h.
    # A spot launch would pass the deadline check of its first tick, but its 12 ticks of
    # start-up would not: the safety rule would stop it after 5 ticks, billed for nothing.
    trace = make_trace([[1] * 6000], spot=1.0, on_demand=3.0, gap_s=60)
    policy = make_policy("mdp")
    seen = _decisions(policy)
    run = simulate(policy, trace, Job.from_hours(1.0, 1.3, 0.2), 3000)
    assert run.met_deadline
    assert run.launches == 1 and run.spot_h == 0, [d.kind.value for d in seen[:8]]


@pytest.mark.parametrize(("cheap_usd", "hops"), [(0.5, True), (0.99, False)])
def test_a_job_on_spot_hops_to_a_cheaper_zone_only_when_the_saving_pays_the_launches(cheap_usd, hops):
    # z0: always up at $1/h. z1: 10-hour up runs between 10-minute outages, at `cheap_usd`; the
    # job starts in one of z1's outages, so it launches in z0, then z1 comes back.
    z1 = ([1] * 600 + [0] * 10) * 8
    start = len(z1) - 5
    z1 += [1] * 2000
    trace = make_trace([[1] * len(z1), z1], spot=[[1.0], [cheap_usd]], on_demand=3.0, gap_s=60)
    policy = make_policy("mdp")
    seen = _decisions(policy)
    run = simulate(policy, trace, Job.from_hours(4.0, 6.0, 0.2), start)
    assert run.met_deadline and run.on_demand_h == 0
    assert seen[0].zone == "z0"
    zones = [d.zone for d in seen]
    if hops:  # one hop, soon after z1 is back: the rest of the work at half the price
        assert run.launches == 2 and zones[-1] == "z1" and zones.index("z1") < 15, zones[:20]
        assert run.cost_usd < 0.6 * (4.0 + 0.4)
    else:  # a cent an hour never pays a launch
        assert run.launches == 1 and set(zones) == {"z0"}


def _union_hop_per_tick(available: list[list[int]], tick: int) -> float:
    trace = make_trace(available, gap_s=3600)  # 1 h ticks: the prior is 2 falls in 8 up ticks
    ctx = Context(0.0, 3600, 3600.0, 0.0, 7200.0, 720.0, NONE, 0.0, MarketView.of_trace(trace, tick),
                  trace.zones)
    return _union_runs(ctx).hop_per_tick


def test_several_zones_hop_at_the_steadiest_zones_rate_of_falls_while_another_is_up():
    # Without history a fall is expected every 4 h of up time, each a hop (the prior alone).
    assert _union_hop_per_tick([[1, 1], [1, 1]], 0) == pytest.approx(2 / (1 + 8))
    # z0 falls once at t4 with z1 up: (1 + 2) / (7 up ticks + 8); z1 falls at t5 with z0 up:
    # (1 + 2) / (6 + 8). The steadier zone's rate is the hop rate; the union never fell.
    z0, z1 = [1, 1, 1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0, 1]
    assert _union_hop_per_tick([z0, z1], 7) == pytest.approx(3 / 15)
    # A fall with every zone down is the union's outage, not a hop: z0's rate counts no fall.
    assert _union_hop_per_tick([[1, 1, 1, 0, 1, 1], [0, 0, 0, 0, 1, 1]], 5) == pytest.approx(2 / (5 + 8))
