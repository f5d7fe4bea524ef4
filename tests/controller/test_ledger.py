"""Billing on the replayed market and the ledger's arithmetic, against independent sums."""

from __future__ import annotations

import itertools
import random

import pytest

from spotfit import sdk
from spotfit.controller.ledger import ledger
from spotfit.controller.loop import Controller
from spotfit.controller.outcome import classify
from spotfit.market.replay import MIN_BILLED_S, MarketReplay
from spotfit.market.trace import load_trace, resolve_trace
from spotfit.spec.job import JobSpec
from tests.support.ledger import launch_cost_usd


@pytest.fixture(scope="module")
def replay() -> MarketReplay:
    return MarketReplay(load_trace(resolve_trace("aws-v100")), ["us-east-2b"], 600.0)


def test_spot_cost_is_the_integral_of_tick_prices(replay):
    rng = random.Random(7)
    for _ in range(25):
        start = replay.origin_s + rng.uniform(0, 40 * 86400)
        end = start + rng.choice([5.0, 59.0, 600.0, rng.uniform(0, 20000)])
        billed, cost = replay.cost_usd("spot", "us-east-2b", start, end)
        assert billed == max(end - start, MIN_BILLED_S)
        assert cost == pytest.approx(launch_cost_usd("spot", "us-east-2b", start, end), rel=1e-9)


def test_on_demand_cost_and_minimum(replay):
    billed, cost = replay.cost_usd("on_demand", None, replay.origin_s, replay.origin_s + 10)
    assert billed == 60.0 and cost == pytest.approx(60 / 3600 * 3.06)


def test_an_ended_attempt_is_billed_for_exactly_the_span_it_records(tmp_path):
    # The replay's clock runs `time_scale` times faster than the wall: any two readings differ.
    # Here every reading is 300 trace seconds after the previous one, so an attempt billed at
    # one reading and recorded as ending at another would show a span it was not billed for.
    spec = JobSpec.model_validate({"name": "bill", "script": "train.py", "market": {
        "trace": "aws-v100", "zones": ["us-east-2b"], "start": "2023-03-08T17:59:16", "time_scale": 2600}})
    db = sdk.db()
    db.create_job("bill-1", "bill", spec.model_dump_json(), f"file://{tmp_path}/store")
    controller = Controller(db, "bill-1")
    start_s = controller.plan.market.replay.origin_s
    readings = itertools.count(start_s + 1000.0, 300.0)
    controller.plan.now_s = lambda: next(readings)
    number = db.add_attempt("bill-1", backend="local", zone="us-east-2b", market="spot", state="running",
                            trace_start_s=start_s, start_step=0)
    controller._finish(db.attempts("bill-1")[0], "preempted", 75)
    [attempt] = db.attempts("bill-1")
    assert attempt["number"] == number and attempt["state"] == "preempted"
    assert attempt["billed_s"] == attempt["trace_end_s"] - attempt["trace_start_s"]
    assert attempt["cost_usd"] == pytest.approx(
        launch_cost_usd("spot", "us-east-2b", attempt["trace_start_s"], attempt["trace_end_s"]), rel=1e-9)


def _attempt(n, state, start_step, end_step, t0, t1, cost, first_step_s=5.0):
    return {"number": n, "state": state, "market": "spot", "zone": "z", "start_step": start_step,
            "end_step": end_step, "trace_start_s": t0, "trace_end_s": t1, "billed_s": t1 - t0,
            "cost_usd": cost, "info": {"timings": {"first_step_s": first_step_s}, "time_scale": 10.0,
                                       "on_demand_usd_per_h": 3.0}}


def test_ledger_totals_and_waste():
    attempts = [
        _attempt(1, "killed", 0, 57, 0.0, 1000.0, 0.3),  # killed at 57, last checkpoint at 50
        _attempt(2, "completed", 50, 141, 1100.0, 2500.0, 0.4),
    ]
    doc = ledger(attempts, total_steps=141)
    t = doc["totals"]
    assert t["spent_usd"] == pytest.approx(0.7)
    assert t["steps_redone"] == 7
    assert t["restart_overhead_s"] == pytest.approx(50.0)  # 5 wall s x time_scale 10, 2nd launch only
    per_step = ((1000 - 50) + (1400 - 50)) / (57 + 91)
    assert t["on_demand_usd"] == pytest.approx((50 + per_step * 141) / 3600 * 3.0)
    assert t["savings_pct"] == pytest.approx(round(100 * (1 - 0.7 / t["on_demand_usd"]), 1))
    assert sum(r["cost_usd"] for r in doc["rows"]) == pytest.approx(t["spent_usd"])


def test_classify_outcomes():
    assert classify(0) == "completed"
    assert classify(75) == "preempted"
    assert classify(76) == "stopped"
    assert classify(None, 9) == "killed"
    assert classify(None) == "killed"
    assert classify(1) == "failed"


def test_launches_without_capacity_are_not_billed():
    attempts = [
        {**_attempt(1, "no_capacity", 0, None, 0.0, 0.0, 0.0), "billed_s": 0.0},
        _attempt(2, "completed", 0, 100, 0.0, 1000.0, 0.25),
    ]
    doc = ledger(attempts, total_steps=100)
    assert [r["attempt"] for r in doc["rows"]] == [2]
    assert doc["totals"]["spent_usd"] == pytest.approx(0.25)



def test_status_and_cost_show_an_attempt_at_the_same_price(spotfit_home):
    # $0.2983499 printed as it is reads $0.2983; the ledger rounds to 6 places first ($0.29835, printed $0.2984).
    import io

    from rich.console import Console

    from spotfit.cli import render

    db = sdk.db()
    db.create_job("cents-1", "cents", '{"name": "cents", "script": "t.py"}', "memory://cents")
    number = db.add_attempt("cents-1", backend="local", zone="us-west-2b", market="spot", state="completed",
                            trace_start_s=0.0, start_step=0)
    db.update_attempt("cents-1", number, trace_end_s=360.0, end_step=10, billed_s=360.0, cost_usd=0.2983499)
    printed = {}
    for name, show, doc in (("status", render.print_status, sdk.status("cents-1")),
                            ("cost", render.print_cost, sdk.cost("cents-1"))):
        out = io.StringIO()
        show(Console(file=out, width=200), doc)
        printed[name] = out.getvalue()
    assert "$0.2984" in printed["status"] and "$0.2983" not in printed["status"], printed["status"]
    assert "$0.2984" in printed["cost"] and "$0.2983" not in printed["cost"], printed["cost"]
