"""The replay's clock and ticks, without processes: what the controller asks and bills when.

The planner is driven as the loop drives it (launch, progress reports, tick starts, the end of
an attempt) against a real state DB; the clock is read on the steps (the spec gives `work_h`),
so nothing here depends on wall time.
"""

from __future__ import annotations

from spotfit import sdk
from spotfit.controller.attempts import AttemptPlanner
from spotfit.market.policies.base import ON_DEMAND, BasePolicy, spot
from spotfit.spec.job import JobSpec

ZONE = "us-east-1f"
START = "2023-03-19T17:43:31"  # a tick start; us-east-1f: spot up 1 tick, then down 4
GAP_S = 195.0
OVERHEAD_S = 720.0
TOTAL_STEPS = 200
WORK_S = 7200.0


class _Script(BasePolicy):
    """Spot while it is up, else on-demand; records the tick (since the start) of each question."""

    name = "script"

    def __init__(self):
        self.asked: list[int] = []

    def decide(self, ctx):
        self.asked.append(round(ctx.now_s / ctx.gap_s))
        return spot(ZONE) if ctx.market.is_available(ZONE) else ON_DEMAND


def _planner(tmp_path) -> tuple[AttemptPlanner, _Script]:
    spec = JobSpec.model_validate({"name": "clock", "script": "train.py", "work_h": WORK_S / 3600, "deadline_h": 3,
                                   "market": {"trace": "aws-v100", "zones": [ZONE], "start": START,
                                              "time_scale": 1000.0, "overhead_h": OVERHEAD_S / 3600}})
    sdk.db().create_job("clock-1", "clock", spec.model_dump_json(), f"file://{tmp_path}/s")
    plan = AttemptPlanner(spec, sdk.db(), "clock-1")
    plan.policy = _Script()
    plan.start_clock()
    return plan, plan.policy


def _launch(plan: AttemptPlanner, market: str, zone: str | None) -> dict:
    db = sdk.db()
    number = db.add_attempt("clock-1", backend="local", zone=zone, market=market, state="running",
                            trace_start_s=plan.now_s(), start_step=plan.meter.step)
    return db.attempts("clock-1")[number - 1]


def _end(plan: AttemptPlanner, attempt: dict, state: str, market_stop: bool) -> None:
    end_s = plan.now_s()
    billed_s, cost = plan.bill(attempt, end_s)
    sdk.db().update_attempt("clock-1", attempt["number"], state=state, trace_end_s=end_s, billed_s=billed_s,
                            cost_usd=cost, end_step=plan.meter.step)
    plan.attempt_ended(market_stop)


def test_the_clock_holds_through_start_up_and_ends_attempts_at_tick_starts(tmp_path):
    plan, policy = _planner(tmp_path)
    origin = plan.market.replay.origin_s
    assert plan.decide_idle() == spot(ZONE) and plan.now_s() == origin
    first = _launch(plan, "spot", ZONE)

    # Starting and restoring: however long it takes here, the trace clock stands still.
    plan.observe({"phase": "starting", "step": 0})
    assert plan.now_s() == origin and plan.market_event(first) is None

    # Training: the clock resumes at launch + overhead and runs by steps (work / total each).
    plan.observe({"phase": "training", "step": 0, "total_steps": TOTAL_STEPS}, first)
    assert plan.now_s() == origin + OVERHEAD_S
    plan.observe({"phase": "training", "step": 3, "total_steps": TOTAL_STEPS}, first)
    assert plan.now_s() == origin + OVERHEAD_S + 3 * WORK_S / TOTAL_STEPS

    # Spot was gone at the next tick start, inside the overhead: the attempt ends there.
    assert plan.market_event(first) == ("preempted", origin + GAP_S)
    plan.observe({"phase": "training", "step": 5, "total_steps": TOTAL_STEPS}, first)  # it winds down
    assert plan.now_s() == origin + GAP_S
    _end(plan, first, "preempted", market_stop=True)
    [first] = sdk.db().attempts("clock-1")
    assert first["billed_s"] == GAP_S  # one tick: no local start-up, no wind-down

    # Asked again in the same tick (preempted), it launches there: on-demand, at the tick start.
    assert plan.decide_idle() == ON_DEMAND and plan.now_s() == origin + GAP_S
    assert policy.asked == [0, 1]
    second = _launch(plan, "on_demand", None)
    plan.observe({"phase": "training", "step": 5, "total_steps": TOTAL_STEPS}, second)
    # The modeled work so far is none (the first attempt never got past its overhead): the
    # 5 steps it made count in this attempt's span.
    assert plan.now_s() == origin + GAP_S + OVERHEAD_S + 5 * WORK_S / TOTAL_STEPS

    # Spot is back at tick 5: the policy, asked at each tick start passed, switches there.
    event = plan.market_event(second)
    assert event == ("switch", origin + 5 * GAP_S), event
    assert policy.asked == [0, 1, 2, 3, 4, 5]
    assert plan.now_s() == origin + 5 * GAP_S
    _end(plan, second, "stopped", market_stop=True)
    assert plan.decide_idle() == spot(ZONE) and plan.now_s() == origin + 5 * GAP_S
    assert policy.asked == [0, 1, 2, 3, 4, 5]  # the switch is launched without asking again
    assert plan.overhead_s() == OVERHEAD_S  # measured launch -> training: the modeled overhead
    kinds = [e["kind"] for e in sdk.db().events("clock-1")]
    assert kinds.count("training") == 2
