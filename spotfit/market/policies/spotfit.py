"""`spotfit`: the default policy — spend the slack where the history says it buys the most spot.

Slack (time to spare if the job went on-demand now) is what every cheap decision costs: each
idle tick spends a tick of it, each launch spends `overhead_s`. The policy decides from the past
and the present only (the zone's completed up and down runs so far, its current run, prices):

1. Safety: whenever doing anything but on-demand this tick could leave too little time to
   finish on on-demand from the next tick, run on-demand (`safe_off_on_demand`).
2. Spot up: keep running spot; launch it from idle. From on-demand, switch only when the
   expected rest of this up run (given how long it has lasted) saves more than the two
   launches it costs (spot now, on-demand again after the preemption), slack included, and
   only while the slack can pay both launches.
3. Spot down, on on-demand: stay (hysteresis: leaving wastes the launch just paid).
4. Reserve: slack is spent no faster than the work gets done. Waiting must leave at least
   initial slack × work left / work (+ two launches); a switch back to spot half of that. The
   reserve never exceeds what finishing on spot alone is expected to need (outages and
   relaunches over the work left, from the past runs), so loose deadlines wait outages out.
5. Spot down, idle: wait while this down run is younger than a threshold θ, else go on-demand.
   θ is the largest wait such that waiting up to θ through every down run still to come
   (empirical down-run lengths, E[min(d, θ)]) fits the slack left after the launches those
   down runs will cost. The down runs to come are one per mean up run of the spot time the
   job still needs, and no more than fit in the time left: with a loose deadline θ is
   unbounded and the policy is greedy with a safety net. Short outages are waited out; long
   ones are bridged on-demand.

Multi-zone (several `ctx.zones`): the same rules over the zones together; a preempted or idle
job launches in the available zone with the lowest effective price (spot price plus the
relaunch overhead spread over the zone's expected remaining up time); it waits only while
no zone is up. (θ over the zones' union, any zone up, was tried and not kept: it cost more on
the February trace, 1.142 against 1.047 × the optimum at deadline / work 52 / 48.)

Example:

>>> Spotfit().name
'spotfit'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spotfit.market.policies.base import (
    NONE,
    ON_DEMAND,
    BasePolicy,
    Context,
    Decision,
    Kind,
    gain_if_continued,
    gain_if_launched,
    safe_off_on_demand,
    spot,
)

# Constants chosen on the bundled February 2023 trace (in sample); the August 2023 traces are
# the out-of-sample check (bench/bench_policies.py).
# Before a zone has history: two pseudo-runs of typical spot up and down times.
_PRIOR_UP_H, _PRIOR_DOWN_H, _PRIOR_RUNS = 4.0, 1.0, 2
_PRIOR_RUN_H = 1.0  # expected rest of a run when too few past runs lasted as long
_RESERVE_SHARE = 1.0  # of the initial slack, kept back in proportion to the work left
_SWITCH_RESERVE = 0.5  # share of that reserve that a switch back to spot must also leave
_NEED_MARGIN = 1.0  # reserve at most this many times the slack that spot alone is expected to need
_RECENT = 20  # completed up runs that judge whether the current one is worth a launch


class Spotfit(BasePolicy):
    name = "spotfit"
    multi_zone = True

    def decide(self, ctx: Context) -> Decision:
        market = ctx.market
        up = [z for z in ctx.zones if market.is_available(z)]
        if ctx.mode.kind is Kind.SPOT:  # still up, or the simulator would have preempted it
            return ctx.mode if safe_off_on_demand(ctx, gain_if_continued(ctx)) else ON_DEMAND
        if up:
            zone = min(up, key=lambda z: effective_usd_per_h(ctx, z))
            if not safe_off_on_demand(ctx, gain_if_launched(ctx)):
                return ON_DEMAND
            if ctx.mode.kind is Kind.NONE:
                return spot(zone)
            return spot(zone) if self.leaves_on_demand(ctx, zone) else ON_DEMAND
        if ctx.mode.kind is Kind.ON_DEMAND or not safe_off_on_demand(ctx, 0.0):
            return ON_DEMAND
        return NONE if self.waits(ctx) else ON_DEMAND

    # The two open choices; a subclass may judge them otherwise (`rollout`).

    def leaves_on_demand(self, ctx: Context, zone: str) -> bool:
        """On on-demand with spot up in `zone` (and the deadline safe): switch to spot now?"""
        return _worth_leaving_on_demand(ctx, zone)

    def waits(self, ctx: Context) -> bool:
        """Idle with no spot up (and the deadline safe): wait this tick rather than go on-demand?"""
        return _worth_waiting(ctx)


@dataclass(frozen=True, slots=True)
class _Runs:
    """A zone's completed up and down runs of spot availability (hours), and the current run's age."""

    up_h: np.ndarray
    down_h: np.ndarray
    age_h: float


def _zone_runs(ctx: Context, zone: str) -> _Runs:
    return _Runs(_runs_h(ctx, zone, True), _runs_h(ctx, zone, False),
                 ctx.market.run_ticks(zone) * ctx.gap_s / 3600.0)


def _runs_h(ctx: Context, zone: str, up: bool) -> np.ndarray:
    lengths = ctx.market.up_runs(zone) if up else ctx.market.down_runs(zone)
    return lengths * (ctx.gap_s / 3600.0)


def _residual_h(lengths_h: np.ndarray, age_h: float, typical: bool = False) -> float:
    """Expected (or, `typical`, median) rest of a run that has lasted `age_h`, from the past
    runs' lengths."""
    longer = lengths_h[lengths_h > age_h]
    if longer.size < 3:
        return max(age_h, _PRIOR_RUN_H)
    return float((np.median(longer) if typical else longer.mean()) - age_h)


def rest_h(ctx: Context, zone: str, typical: bool = False) -> float:
    """Expected (or, `typical`, median) rest of `zone`'s current up run in hours, from its past
    up runs: the mean is pulled up by the rare long runs, the median is what a run usually gives."""
    return _residual_h(_runs_h(ctx, zone, True), ctx.market.run_ticks(zone) * ctx.gap_s / 3600.0, typical)


def effective_usd_per_h(ctx: Context, zone: str) -> float:
    """Spot price in `zone` with a launch's overhead spread over its expected rest of up time."""
    price = ctx.market.spot_usd_per_h(zone)
    return price * (1.0 + (ctx.overhead_s / 3600.0) / max(rest_h(ctx, zone), 1e-3))


def _means_h(runs: _Runs) -> tuple[float, float]:
    """Mean up and down run lengths, with the prior's pseudo-runs."""
    mean_up = (runs.up_h.sum() + _PRIOR_RUNS * _PRIOR_UP_H) / (runs.up_h.size + _PRIOR_RUNS)
    mean_down = (runs.down_h.sum() + _PRIOR_RUNS * _PRIOR_DOWN_H) / (runs.down_h.size + _PRIOR_RUNS)
    return float(mean_up), float(mean_down)


def _outages_ahead(ctx: Context, runs: _Runs) -> float:
    """Outages the job is expected to meet: one per mean up run of the spot time it still needs,
    and no more than fit in the time left."""
    mean_up, mean_down = _means_h(runs)
    return min(ctx.work_left_s / 3600.0 / mean_up, ctx.time_left_s / 3600.0 / (mean_up + mean_down))


def _slack_price(ctx: Context, zone: str, runs: _Runs) -> float:
    """$ per hour of slack: what an hour of on-demand instead of spot costs, when slack is short."""
    od = ctx.market.on_demand_usd_per_h(ctx.zones)
    gap = od - ctx.market.spot_usd_per_h(zone)
    return gap if _wait_threshold_h(ctx, runs) < float("inf") else 0.0


def _reserve_s(ctx: Context) -> float:
    """Slack kept back for the rest of the job: a share of the initial slack, shrinking with
    the work left, so that no early outage or flapping spends what later preemptions need;
    but never more than a margin over what finishing on spot alone is expected to need."""
    initial = ctx.deadline_s - ctx.work_s - ctx.overhead_s
    share = _RESERVE_SHARE * initial * ctx.work_left_s / ctx.work_s
    return min(share, _NEED_MARGIN * min(_spot_only_need_s(ctx, _zone_runs(ctx, z)) for z in ctx.zones))


def keeps_reserve_waiting(ctx: Context) -> bool:
    """Whether idling this tick leaves the reserve and two launches (rule 4)."""
    return ctx.slack_s - ctx.gap_s >= _reserve_s(ctx) + 2 * ctx.overhead_s


def keeps_reserve_switching(ctx: Context) -> bool:
    """Whether leaving on-demand for spot leaves both launches and part of the reserve (rules 2, 4)."""
    return ctx.slack_s - 2 * ctx.overhead_s - ctx.gap_s >= _SWITCH_RESERVE * _reserve_s(ctx)


def _spot_only_need_s(ctx: Context, runs: _Runs) -> float:
    """Expected slack that finishing the work left on spot alone would take: the outages met on
    the way and one launch after each (means of the past runs, with priors)."""
    mean_up, mean_down = _means_h(runs)
    outages = ctx.work_left_s / 3600.0 / mean_up
    return outages * (mean_down * 3600.0 + ctx.overhead_s)


def _worth_leaving_on_demand(ctx: Context, zone: str) -> bool:
    o = ctx.overhead_s
    if not keeps_reserve_switching(ctx):
        return False
    market = ctx.market
    od, price = market.on_demand_usd_per_h(ctx.zones), market.spot_usd_per_h(zone)
    age = market.run_ticks(zone) * ctx.gap_s
    past = market.up_runs(zone)[-_RECENT:] * ctx.gap_s
    rest = past[past > age] - age
    if rest.size < 3:  # longer than (almost) anything seen lately: expect it to last as long again
        rest = np.full(1, float(age))
    rest = np.minimum(rest, ctx.work_left_s)
    lam = _slack_price(ctx, zone, _zone_runs(ctx, zone))
    net = (np.maximum(rest - o, 0) * (od - price) - np.minimum(rest, o) * price - o * od
           - lam * (np.minimum(rest, o) + o)) / 3600.0
    return float(net.mean()) > 0


def _worth_waiting(ctx: Context) -> bool:
    if not keeps_reserve_waiting(ctx):
        return False
    if len(ctx.zones) > 1:
        return True
    runs = _zone_runs(ctx, ctx.zones[0])
    return runs.age_h <= _wait_threshold_h(ctx, runs)


def _wait_threshold_h(ctx: Context, runs: _Runs) -> float:
    """Longest wait per outage that the slack affords over the outages still to come (θ)."""
    mean_up, mean_down = _means_h(runs)
    outages = _outages_ahead(ctx, runs)
    budget_h = ctx.slack_s / 3600.0 - outages * ctx.overhead_s / 3600.0
    if budget_h <= 0:
        return 0.0
    downs = runs.down_h if runs.down_h.size >= 3 else np.full(1, mean_down)
    d = np.sort(downs)
    n = d.size
    # E[min(d, θ)] at θ = d[i]: the shorter runs in full, the rest cut at d[i].
    expected = (np.concatenate(([0.0], np.cumsum(d)[:-1])) + d * (n - np.arange(n))) / n
    need = outages * expected
    if need[-1] <= budget_h:
        return float("inf")
    i = int(np.searchsorted(need, budget_h, side="right"))
    below_need, below_theta = (need[i - 1], d[i - 1]) if i else (0.0, 0.0)
    # Between two sorted lengths E[min(d, θ)] grows linearly with slope (n - i) / n.
    return below_theta + (budget_h - below_need) / (outages * (n - i) / n)
