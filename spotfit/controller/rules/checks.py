"""The rules themselves: pure functions from an `Observation` to a message (fired) or None.

Each check reads only the observation and its own parameters; the engine (`__init__.py`) owns
the bookkeeping (fire once, money saved, actions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spotfit.spec import rules as r


@dataclass
class Observation:
    """What the controller knows about a job at one moment (wall seconds, trace prices)."""

    now_s: float
    step: int = 0
    total_steps: int | None = None
    training: bool = False
    losses: list[tuple[int, float | None]] = field(default_factory=list)  # recent (step, loss)
    metrics: dict[str, Any] = field(default_factory=dict)  # the latest epoch's metrics
    nan_loss: bool = False
    nan_step: int | None = None  # the first step whose loss was NaN or infinite
    utilization: list[tuple[float, float]] = field(default_factory=list)  # (wall s, percent)
    last_step_at: float | None = None
    cost_usd: float = 0.0
    spot_usd_per_h: float | None = None  # price of the zone the job runs (or would run) on
    last_activity_at: float | None = None  # a notebook's last kernel activity (wall s; its start if none)


def loss_plateau(rule: r.LossPlateau, obs: Observation) -> str | None:
    series = [(s, v) for s, v in obs.losses if v is not None]
    w = rule.window_steps
    if rule.metric != "loss" or len(series) < 2 * w:
        return None
    last = [v for _, v in series[-w:]]
    prev = [v for _, v in series[-2 * w:-w]]
    prev_mean, last_mean = sum(prev) / w, sum(last) / w
    improvement = (prev_mean - last_mean) / abs(prev_mean) if prev_mean else 0.0
    if improvement < rule.min_rel_improvement:
        return (f"{rule.metric} plateaued: mean {last_mean:.4g} over steps {series[-w][0]}-{series[-1][0]} vs "
                f"{prev_mean:.4g} before ({100 * improvement:.2f}% < {100 * rule.min_rel_improvement:g}%)")
    return None


def target_metric(rule: r.TargetMetric, obs: Observation) -> str | None:
    value = obs.metrics.get(rule.metric)
    if value is None:
        return None
    reached = value >= rule.value if rule.mode == "max" else value <= rule.value
    return f"{rule.metric} = {value:.4g} reached the target {rule.value:g}" if reached else None


def idle_accelerator(rule: r.IdleAccelerator, obs: Observation) -> str | None:
    if not obs.training or not obs.utilization:
        return None
    since = obs.now_s - rule.for_s
    window = [(t, p) for t, p in obs.utilization if t >= since]
    covered = any(t <= since + 1.0 for t, _ in obs.utilization)  # samples reach back far enough
    if not covered or not window or max(p for _, p in window) >= rule.below_pct:
        return None
    mean = sum(p for _, p in window) / len(window)
    return f"utilization {mean:.0f}% (< {rule.below_pct:g}%) for {rule.for_s:g}s"


def budget(rule: r.Budget, obs: Observation) -> str | None:
    if obs.cost_usd >= rule.usd:
        return f"cost ${obs.cost_usd:.4f} reached the budget ${rule.usd:g}"
    return None


def price_cap(rule: r.PriceCap, obs: Observation) -> str | None:
    price = obs.spot_usd_per_h
    if price is not None and price > rule.usd_per_h:
        return f"spot price ${price:.4f}/h is above the cap ${rule.usd_per_h:g}/h"
    return None


def nan_loss(rule: r.NanLoss, obs: Observation) -> str | None:
    if not obs.nan_loss:
        return None
    return "the loss is NaN or infinite" + ("" if obs.nan_step is None else f" at step {obs.nan_step}")


def stalled(rule: r.Stalled, obs: Observation) -> str | None:
    if obs.training and obs.last_step_at is not None and obs.now_s - obs.last_step_at >= rule.for_s:
        return f"no step for {obs.now_s - obs.last_step_at:.0f}s after step {obs.step}"
    return None


def idle_notebook(rule: r.IdleNotebook, obs: Observation) -> str | None:
    """No kernel activity for `for_s` and every utilization sample of that window below `below_pct`."""
    if obs.last_activity_at is None or obs.now_s - obs.last_activity_at < rule.for_s:
        return None
    window = [p for t, p in obs.utilization if t >= obs.now_s - rule.for_s]
    if window and max(window) >= rule.below_pct:
        return None
    peak = f", utilization at most {max(window):.0f}%" if window else ""
    return (f"no kernel activity for {obs.now_s - obs.last_activity_at:.0f}s (>= {rule.for_s:g}s){peak} "
            f"(< {rule.below_pct:g}%)")


# rule name -> check(rule spec, observation) -> the reason it fired, or None
CHECKS: dict[str, Callable[[Any, Observation], str | None]] = {
    "loss_plateau": loss_plateau,
    "target_metric": target_metric,
    "idle_accelerator": idle_accelerator,
    "budget": budget,
    "price_cap": price_cap,
    "nan_loss": nan_loss,
    "stalled": stalled,
    "idle_notebook": idle_notebook,
}

