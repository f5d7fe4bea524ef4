"""The tick model's accounting on hand-made traces."""

from __future__ import annotations

import pytest

from spotfit.market.policies.base import NONE, ON_DEMAND, BasePolicy, InvalidDecision, spot
from spotfit.market.simulator import Job, simulate, start_ticks, summarize
from tests.support.traces import make_trace


class Script(BasePolicy):
    """Plays a fixed list of decisions, one per tick (the last one repeats)."""

    name = "script"

    def __init__(self, decisions):
        self.decisions = decisions
        self.seen = []

    def decide(self, ctx):
        self.seen.append(ctx)
        t = int(round(ctx.now_s / ctx.gap_s))
        return self.decisions[min(t, len(self.decisions) - 1)]


def test_launch_pays_overhead_first_then_progress():
    # 195 s ticks, 0.2 h overhead: a launch makes 0, 0, 0, then 60 s of progress.
    trace = make_trace([[1] * 20], gap_s=195)
    job = Job(work_s=60 + 195, deadline_s=10 * 195, overhead_s=720)
    policy = Script([ON_DEMAND])
    run = simulate(policy, trace, job)
    assert [c.work_done_s for c in policy.seen] == [0, 0, 0, 0, 60]
    assert [c.overhead_left_s for c in policy.seen] == [0, 525, 330, 135, 0]
    assert run.launches == 1 and run.finish_h == pytest.approx((4 * 195 + 195) / 3600)
    assert run.cost_usd == pytest.approx(5 * 195 / 3600 * 3.0)  # last tick billed in full


def test_preemption_keeps_progress_and_relaunch_pays_again():
    trace = make_trace([[1, 1, 1, 0, 1, 1, 1, 1]], gap_s=60, spot=1.0)
    job = Job(work_s=200, deadline_s=480, overhead_s=30)
    policy = Script([spot("z0"), spot("z0"), spot("z0"), NONE, spot("z0")])
    run = simulate(policy, trace, job)
    assert policy.seen[3].preempted and policy.seen[3].mode == NONE
    assert [c.work_done_s for c in policy.seen] == [0, 30, 90, 150, 150, 180]
    assert run.preemptions == 1 and run.launches == 2
    assert run.finish_h * 3600 == pytest.approx(5 * 60 + 20)
    assert run.cost_usd == pytest.approx(5 * 60 / 3600)


def test_price_is_that_ticks_spot_price_and_switching_zone_relaunches():
    trace = make_trace([[1, 1, 1, 1], [1, 1, 1, 1]], spot=[[1, 1, 1, 1], [2, 4, 4, 4]], gap_s=3600)
    job = Job(work_s=3 * 3600, deadline_s=4 * 3600, overhead_s=0)
    run = simulate(Script([spot("z0"), spot("z1"), spot("z0")]), trace, job)
    assert run.cost_usd == pytest.approx(1 + 4 + 1) and run.launches == 3 and run.zone == "*"


def test_choosing_unavailable_spot_is_an_invalid_decision():
    trace = make_trace([[0, 1]], gap_s=60)
    with pytest.raises(InvalidDecision, match="unavailable"):
        simulate(Script([spot("z0")]), trace, Job(60, 120, 0))


def test_missed_deadline_is_reported():
    trace = make_trace([[0] * 10], gap_s=60)
    run = simulate(Script([NONE, NONE, ON_DEMAND]), trace, Job(120, 180, 0))
    assert not run.met_deadline and run.finish_h == pytest.approx(240 / 3600)


def test_start_ticks_span_the_trace_leaving_a_deadline_window():
    trace = make_trace([[1] * 100], gap_s=60)
    assert start_ticks(trace, Job(600, 1200, 0), 3) == [0, 40, 80]


def test_summary_ratio_to_optimum():
    trace = make_trace([[1, 0, 1, 1, 0, 1, 1, 1]], spot=[[2, 2, 1, 1, 1, 1, 1, 1]], gap_s=60)
    job = Job(120, 360, 0)
    runs = [simulate(p, trace, job, 0) for p in ("optimum", "on_demand", "greedy")]
    # By hand: the cheapest way is ticks 2 and 3 of spot at $1/h; on-demand is two ticks at
    # $3/h; greedy takes spot whenever it is up: tick 0 at $2/h, then tick 2 at $1/h.
    tick_h = 60 / 3600
    cheapest = 2 * tick_h * 1.0
    assert runs[0].cost_usd == pytest.approx(cheapest) and runs[0].met_deadline
    rows = {r["policy"]: r for r in summarize(runs)}
    assert rows["on_demand"]["mean_ratio_to_optimum"] == pytest.approx(2 * tick_h * 3.0 / cheapest)
    assert rows["greedy"]["mean_ratio_to_optimum"] == pytest.approx((tick_h * 2.0 + tick_h * 1.0) / cheapest)
    assert rows["greedy"]["worst_ratio_to_optimum"] == rows["greedy"]["mean_ratio_to_optimum"]
    assert (rows["greedy"]["runs"], rows["greedy"]["misses"], rows["greedy"]["mean_launches"]) == (1, 0, 2.0)
