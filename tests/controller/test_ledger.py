"""Billing on the replayed market and the ledger's arithmetic, against independent sums."""

from __future__ import annotations

import random

import pytest

from spotfit.controller.ledger import ledger
from spotfit.controller.outcome import classify
from spotfit.market.replay import MIN_BILLED_S, MarketReplay
from spotfit.market.trace import load_trace, resolve_trace
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
