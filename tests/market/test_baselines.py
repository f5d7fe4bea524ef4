"""The published baselines (Can't Be Late's greedy and Uniform Progress) against schedules
computed by hand on small traces: 60 s ticks, 60 s restart overhead (d = one tick), spot
$1/h, on-demand $3/h. Each schedule lists one decision per tick: "S" spot, "O" on-demand,
"-" idle; the comments give the rule that decided each tick."""

from __future__ import annotations

import pytest

from spotfit.market.policies.base import Kind, make_policy
from spotfit.market.simulator import Job, simulate
from tests.support.traces import make_trace

LETTER = {Kind.SPOT: "S", Kind.ON_DEMAND: "O", Kind.NONE: "-"}


def schedule(name: str, available: list[int], work_ticks: int, deadline_ticks: int):
    """The run and its decisions as letters, one per tick until the job finished."""
    trace = make_trace([available + [available[-1]] * 40], gap_s=60, spot=1.0, on_demand=3.0)
    policy = make_policy(name)
    letters: list[str] = []
    decide = policy.decide
    policy.decide = lambda ctx: letters.append(LETTER[(d := decide(ctx)).kind]) or d  # type: ignore[method-assign]
    run = simulate(policy, trace, Job(work_ticks * 60.0, deadline_ticks * 60.0, 60.0))
    return run, "".join(letters)


def zone_schedule(name: str, available: list[list[int]], work_ticks: int, deadline_ticks: int,
                  spot: list[float] | None = None):
    """Over two or more zones together: the run and each tick's decision as a letter and, on
    spot, the zone ("S0" spot in z0, "O" on-demand, "-" idle), space-separated. `spot`: each
    zone's spot $/h (default $1 everywhere)."""
    width = max(map(len, available)) + 40
    prices = [[p] * width for p in spot] if spot else 1.0
    trace = make_trace([row + [row[-1]] * (width - len(row)) for row in available], gap_s=60,
                       spot=prices, on_demand=3.0)
    policy = make_policy(name)
    seen: list[str] = []
    decide = policy.decide

    def record(ctx):
        d = decide(ctx)
        seen.append(LETTER[d.kind] + (str(d.zone)[1:] if d.kind is Kind.SPOT else ""))
        return d

    policy.decide = record  # type: ignore[method-assign]
    run = simulate(policy, trace, Job(work_ticks * 60.0, deadline_ticks * 60.0, 60.0), 0, trace.zones)
    return run, " ".join(seen)


def usd(spot_ticks: int, od_ticks: int) -> float:
    return (spot_ticks * 1.0 + od_ticks * 3.0) / 60


def test_uniform_progress_catches_up_on_demand_and_holds_it_until_ahead_by_2d():
    # Work 10 ticks, deadline 20: the uniform line ep(t) is half a tick of work per tick.
    # t0 spot launch, t1 +1, t2 preempted and cp = ep = 1 (not behind): wait; t3 behind:
    # on-demand launch; t4 spot still down: hold; t5-t7 spot up but cp < ep(t + 2d): hold;
    # t8 cp = 5 = ep(8 + 2): back to spot, which finishes the job at t13.
    run, letters = schedule("uniform_progress", [1, 1, 0, 0, 0, 1], 10, 20)
    assert letters == "SS-OOOOOSSSSSS"
    assert (run.launches, run.preemptions, run.met_deadline) == (3, 1, True)
    assert run.cost_usd == pytest.approx(usd(8, 5))
    assert run.finish_h == pytest.approx(14 * 60 / 3600)


def test_uniform_progress_stays_on_demand_while_spot_is_down_even_when_ahead():
    # Work 4 ticks, deadline 40 (ep(t) = t / 10): t0 behind? no (0 = 0) and spot down: wait;
    # t1 behind: on-demand; then spot never returns and on-demand is held (hysteresis) to the end.
    run, letters = schedule("uniform_progress", [0], 4, 40)
    assert letters == "-OOOOO"
    assert run.cost_usd == pytest.approx(usd(0, 5)) and run.launches == 1


def test_greedy_waits_out_an_outage_and_relaunches_spot():
    run, letters = schedule("greedy", [1, 1, 0, 0, 0, 1], 10, 20)
    assert letters == "SS---SSSSSSSSSS"
    assert (run.launches, run.preemptions) == (2, 1)
    assert run.cost_usd == pytest.approx(usd(12, 0))


@pytest.mark.parametrize("name", ["greedy", "uniform_progress"])
def test_idle_job_goes_on_demand_when_the_time_left_is_work_plus_2d(name):
    # Work 5 ticks, deadline 8. t0 spot launch (7 ticks needed with 2d < 8 left); t1 +1;
    # t2 preempted: 4 + 2 = 6 ticks needed, 6 left: on-demand, held to the end (t6).
    run, letters = schedule(name, [1, 1, 0, 1], 5, 8)
    assert letters == "SSOOOOO"
    assert run.cost_usd == pytest.approx(usd(2, 5)) and run.met_deadline


@pytest.mark.parametrize("name", ["greedy", "uniform_progress"])
def test_a_running_spot_instance_rides_past_the_2d_line(name):
    # Work 5 ticks, deadline 8: at t1 the spot instance is inside the 2d line (5 + 2 >= 7 left)
    # but keeps running, and finishes at t5 on spot alone.
    run, letters = schedule(name, [1], 5, 8)
    assert letters == "SSSSSS"
    assert run.cost_usd == pytest.approx(usd(6, 0)) and run.launches == 1


def test_greedy_on_a_dead_zone_waits_until_the_2d_line():
    # Work 5, deadline 10, spot never up: 5 + 2 >= 10 - t first at t3; on-demand t3-t8.
    run, letters = schedule("greedy", [0], 5, 10)
    assert letters == "---OOOOOO"
    assert run.cost_usd == pytest.approx(usd(0, 6)) and run.finish_h == pytest.approx(9 * 60 / 3600)


@pytest.mark.parametrize("name", ["greedy", "greedy_first"])
def test_greedy_over_two_zones_at_one_price_takes_the_first_up_zone_and_rides_it_until_it_falls(name):
    # Work 6 ticks, deadline 30. t0 z0 up: launch z0; t1 +1; t2 z0 falls, z1 is
    # up: launch z1; t3-t5 ride z1 although z0 is up again (+3); t6 both down: wait; t7 z0 up:
    # launch z0; t8-t9 +2, done. At equal prices the cheapest up zone is the first in order.
    run, letters = zone_schedule(name, [[1, 1, 0, 1, 1, 0, 0, 1], [0, 1, 1, 1, 1, 1, 0, 0]], 6, 30)
    assert letters == "S0 S0 S1 S1 S1 S1 - S0 S0 S0"
    assert (run.launches, run.preemptions, run.met_deadline) == (3, 2, True)
    assert run.cost_usd == pytest.approx(usd(9, 0))


@pytest.mark.parametrize("name", ["uniform_progress", "uniform_progress_first"])
def test_uniform_progress_over_two_zones_counts_spot_as_down_only_when_every_zone_is(name):
    # Work 10, deadline 20 (ep(t) = t / 2). t0 launch z0; t1 +1; t2 z0 falls, z1 up: launch z1;
    # t3 both down and behind (1 < 1.5): on-demand; t4 hold; t5-t7 z1 up but cp < ep(t + 2d):
    # hold; t8 cp = 5 = ep(10): spot in z1, the first up zone; t9-t13 +5, done.
    run, letters = zone_schedule(name, [[1, 1, 0, 0], [0, 0, 1, 0, 0, 1]], 10, 20)
    assert letters == "S0 S0 S1 O O O O O S1 S1 S1 S1 S1 S1"
    assert (run.launches, run.preemptions, run.met_deadline) == (4, 2, True)
    assert run.cost_usd == pytest.approx(usd(9, 5))


@pytest.mark.parametrize("name, letters, cost", [
    # z0 ($2/h) first in order, z1 ($1/h) cheaper, both up. Work 4, deadline 30. The cheapest-zone
    # baselines launch in z1 and ride it: 5 ticks at $1; the published ones launch in z0 and
    # ride it although z1 is cheaper: 5 ticks at $2.
    ("greedy", "S1 S1 S1 S1 S1", 5 * 1.0 / 60),
    ("uniform_progress", "S1 S1 S1 S1 S1", 5 * 1.0 / 60),
    ("greedy_first", "S0 S0 S0 S0 S0", 5 * 2.0 / 60),
    ("uniform_progress_first", "S0 S0 S0 S0 S0", 5 * 2.0 / 60),
])
def test_over_zones_at_different_prices_baselines_launch_in_the_cheapest_up_zone(name, letters, cost):
    run, seen = zone_schedule(name, [[1], [1]], 4, 30, spot=[2.0, 1.0])
    assert seen == letters
    assert run.cost_usd == pytest.approx(cost) and run.launches == 1


def test_a_baseline_riding_spot_stays_when_a_cheaper_zone_comes_up():
    # z1 ($1/h) is down at t0: launch z0 ($2/h); at t1 z1 is up, but a running launch rides its
    # zone until it falls (a hop would pay the restart); t3 z0 falls: relaunch in z1.
    run, seen = zone_schedule("greedy", [[1, 1, 1, 0], [0, 1]], 5, 30, spot=[2.0, 1.0])
    assert seen == "S0 S0 S0 S1 S1 S1 S1"
    assert (run.launches, run.preemptions) == (2, 1)
    assert run.cost_usd == pytest.approx((3 * 2.0 + 4 * 1.0) / 60)
