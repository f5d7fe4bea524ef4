"""The rules as pure functions over observations, and the engine's fire-once bookkeeping."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spotfit.controller import watchdog
from spotfit.controller.rules import Observation, RuleEngine, checks
from spotfit.errors import SpecError
from spotfit.spec import rules as r
from spotfit.spec.job import parse_spec


def _obs(**kw) -> Observation:
    return Observation(now_s=kw.pop("now_s", 1000.0), **kw)


def test_loss_plateau_fires_on_flat_loss_only():
    rule = r.LossPlateau(rule="loss_plateau", window_steps=10)
    flat = [(s, 2.30 + (0.001 if s % 2 else -0.001)) for s in range(1, 21)]
    falling = [(s, 2.3 / s) for s in range(1, 21)]
    assert checks.loss_plateau(rule, _obs(losses=flat))
    assert checks.loss_plateau(rule, _obs(losses=falling)) is None
    assert checks.loss_plateau(rule, _obs(losses=flat[:15])) is None  # not two windows yet


def test_target_metric_max_and_min():
    up = r.TargetMetric(rule="target_metric", metric="val_accuracy", mode="max", value=0.9)
    down = r.TargetMetric(rule="target_metric", metric="val_loss", mode="min", value=0.2)
    assert checks.target_metric(up, _obs(metrics={"val_accuracy": 0.91}))
    assert checks.target_metric(up, _obs(metrics={"val_accuracy": 0.89})) is None
    assert checks.target_metric(down, _obs(metrics={"val_loss": 0.19}))
    assert checks.target_metric(down, _obs(metrics={})) is None


def test_idle_needs_the_whole_duration_below_the_threshold():
    rule = r.IdleAccelerator(rule="idle_accelerator", below_pct=30, for_s=60)
    idle = [(940.0 + i, 5.0) for i in range(61)]
    assert checks.idle_accelerator(rule, _obs(training=True, utilization=idle))
    assert checks.idle_accelerator(rule, _obs(training=True, utilization=idle[30:])) is None  # too short
    busy_once = idle[:50] + [(990.0, 80.0)] + idle[51:]
    assert checks.idle_accelerator(rule, _obs(training=True, utilization=busy_once)) is None
    assert checks.idle_accelerator(rule, _obs(training=False, utilization=idle)) is None


def test_budget_price_nan_stalled():
    assert checks.budget(r.Budget(rule="budget", usd=1), _obs(cost_usd=1.0))
    assert checks.budget(r.Budget(rule="budget", usd=1), _obs(cost_usd=0.99)) is None
    cap = r.PriceCap(rule="price_cap", usd_per_h=1.0)
    assert checks.price_cap(cap, _obs(spot_usd_per_h=1.01))
    assert checks.price_cap(cap, _obs(spot_usd_per_h=1.0)) is None
    assert checks.nan_loss(r.NanLoss(rule="nan_loss"), _obs(nan_loss=True))
    assert "at step 25" in checks.nan_loss(r.NanLoss(rule="nan_loss"), _obs(nan_loss=True, nan_step=25))
    assert checks.nan_loss(r.NanLoss(rule="nan_loss"), _obs(nan_step=None)) is None
    stall = r.Stalled(rule="stalled", for_s=60)
    assert checks.stalled(stall, _obs(training=True, last_step_at=900.0))
    assert checks.stalled(stall, _obs(training=True, last_step_at=950.0)) is None


def _stall_dog(monkeypatch, action: str = "notify"):
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(watchdog, "time", SimpleNamespace(time=lambda: clock.now))
    return clock, watchdog.Watchdog([r.Stalled(rule="stalled", for_s=60, action=action)])


def test_the_stall_clock_starts_at_the_first_step_after_restore_not_at_launch(monkeypatch):
    clock, dog = _stall_dog(monkeypatch)
    assert dog.check({"phase": "running script", "step": 0}, 0.0, None) == []  # importing TF, building
    clock.now = 100.0
    assert dog.check({"phase": "training", "step": 200}, 0.0, None) == []  # restored at 200, tracing
    clock.now = 400.0
    assert dog.check({"phase": "training", "step": 200}, 0.0, None) == []  # no step made yet: start-up
    clock.now = 401.0
    assert dog.check({"phase": "training", "step": 201}, 0.0, None) == []
    clock.now = 460.0
    assert dog.check({"phase": "training", "step": 201}, 0.0, None) == []
    clock.now = 462.0
    [verdict] = dog.check({"phase": "training", "step": 201}, 0.0, None)
    assert verdict.rule == "stalled" and verdict.message == "no step for 61s after step 201"


def test_stalled_fires_again_after_training_recovers_and_stalls_once_more(monkeypatch):
    clock, dog = _stall_dog(monkeypatch)
    dog.check({"phase": "training", "step": 0}, 0.0, None)
    clock.now = 1.0
    dog.check({"phase": "training", "step": 5}, 0.0, None)
    clock.now = 70.0
    assert [v.message for v in dog.check({"phase": "training", "step": 5}, 0.0, None)] == [
        "no step for 69s after step 5"]
    clock.now = 80.0
    assert dog.check({"phase": "training", "step": 5}, 0.0, None) == []  # the same stall: once
    clock.now = 90.0
    assert dog.check({"phase": "training", "step": 9}, 0.0, None) == []  # recovered
    clock.now = 200.0
    assert [v.message for v in dog.check({"phase": "training", "step": 9}, 0.0, None)] == [
        "no step for 110s after step 9"]


def test_engine_fires_once_rearms_and_estimates_savings():
    engine = RuleEngine([r.PriceCap(rule="price_cap", usd_per_h=1.0)])
    obs = _obs(step=25, total_steps=100, cost_usd=0.5, spot_usd_per_h=2.0)
    [verdict] = engine.check(obs)
    assert verdict.action == "pause" and verdict.saved_usd == pytest.approx(1.5)
    assert engine.check(obs) == []
    engine.rearm("price_cap")
    assert len(engine.check(obs)) == 1
    assert RuleEngine([r.NanLoss(rule="nan_loss")], fired={0}).check(_obs(nan_loss=True)) == []


def test_rules_in_the_spec_get_clear_errors():
    with pytest.raises(SpecError, match="did you mean `usd`"):
        parse_spec({"name": "x", "script": "t.py", "rules": [{"rule": "budget", "usdd": 1}]})
    with pytest.raises(SpecError, match="`loss_plateau`, `target_metric`"):
        parse_spec({"name": "x", "script": "t.py", "rules": [{"rule": "budgit", "usd": 1}]})
