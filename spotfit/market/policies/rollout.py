"""`rollout`: decide each open choice by playing the job's futures sampled from the market's past.

Only two choices are open once the deadline's safety rule has spoken (`safe_off_on_demand`:
whenever anything but on-demand this tick could leave too little time to finish on on-demand,
run on-demand):

1. Idle while spot is down (every zone down, for several zones): wait, or bridge on-demand?
2. On on-demand while spot is up: switch to spot now, or stay on on-demand (for a while)?

Everything else is fixed: a running spot launch rides on; an idle job launches spot when spot is
up (in the zone with the lowest effective price, see below); on-demand stays on through an
outage (leaving it would waste the launch just paid).

Each open choice is judged by rollout: K futures are drawn from the market's own history
(`futures.RunModel`: the current run's rest conditioned on its age, then past up and down runs
drawn at random), each option is played in every future followed by a simple base policy
(greedy with the safety net, returning from on-demand to spot when spot comes back), and the
option with the lower mean cost is taken; all options see the same futures. The options are a
family: keep the present mode for 0, 1, 2, 4, ... 128 ticks of the current run, then change, or
keep it through the run; the change happens now only when "0 ticks" is the cheapest, else the
policy keeps its mode and looks again when the chosen hold ends (a plan, so most ticks cost no
rollout). Rollout improves on its base policy under the model, and the model has no tuned
constant: the only numbers are the prior runs used before a zone has any history
(`futures.PRIOR_*`, 4 h up and 1 h down, the previous default's priors), K and the hold grid.

On top, the reserve rules of `spotfit` (rule 4 there, constants chosen on the February trace):
waiting must leave the reserve plus two launches, leaving on-demand half of it plus both
launches. Without them rollout cost less on February on average, but in the window of
`make demo` it left on-demand for a spot run that lasted 20 minutes and then had no slack left
for the next outage, paying more than all on-demand; rollout judges expectations, and the
reserve guards the single path a user watches.

Several zones are used jointly: the futures are runs of "some zone is up" (the zones' union),
and a job riding spot hops to another up zone when its own is preempted, paying one restart
overhead; the hop rate is the steadiest zone's preemptions per up hour minus the union's own
(a hopping job goes where spot is expected to last; the union's falls are outages, not hops).
A launch goes to the up zone with the lowest effective price (spot price with the launch's
overhead spread over the zone's expected remaining up time).

Decisions are deterministic: the futures are drawn from a generator seeded by the trace tick.

Example:

>>> Rollout().name
'rollout'
"""

from __future__ import annotations

import numpy as np

from spotfit.market.policies.base import (
    ON_DEMAND,
    Context,
    Decision,
    Kind,
    spot,
)
from spotfit.market.policies.futures import IDLE, OD, PRIOR_RUNS, PRIOR_UP_H, SPOT, Job, RunModel, play
from spotfit.market.policies.spotfit import Spotfit, keeps_reserve_switching, keeps_reserve_waiting

FUTURES = 256  # futures per decision: the mean cost's standard error is a few % of its spread
HOLD_TICKS = (0, 1, 2, 4, 8, 16, 32, 64, 128)  # the options: change after this many ticks, or never


class Rollout(Spotfit):
    """`spotfit`'s rules, with its two open choices judged by rollouts (the reserve rules kept)."""

    name = "rollout"
    multi_zone = True

    def reset(self) -> None:
        # The plan of the last rollout: keep the present mode until this tick of this run.
        self._plan: tuple[tuple[Kind, Kind, int], int] | None = None

    def leaves_on_demand(self, ctx: Context, zone: str) -> bool:
        return keeps_reserve_switching(ctx) and self._change_now(ctx, spot(zone))

    def waits(self, ctx: Context) -> bool:
        return keeps_reserve_waiting(ctx) and not self._change_now(ctx, ON_DEMAND)

    def _change_now(self, ctx: Context, to: Decision) -> bool:
        """Whether changing to `to` now is the cheapest option, against keeping the present mode
        for some ticks of the current run (then changing) or for all of it."""
        model = _model(ctx)
        run_start = ctx.market.tick - round(model.age_h * 3600.0 / ctx.gap_s)
        key = (ctx.mode.kind, to.kind, run_start)
        if self._plan is not None and self._plan[0] == key and ctx.market.tick < self._plan[1]:
            return False
        price = (ctx.market.spot_usd_per_h(to.zone) if to.zone
                 else float(np.mean([ctx.market.spot_usd_per_h(z) for z in ctx.zones])))
        job = _job(ctx, price)
        runs = model.sample(np.random.default_rng(int(ctx.market.tick)), FUTURES, job.time_left_h)
        holds_h = np.array([*HOLD_TICKS, np.inf]) * ctx.gap_s / 3600.0
        mode, then = (OD, SPOT) if to.kind is Kind.SPOT else (IDLE, OD)
        costs = play(job, runs, model.up_now, mode, ctx.overhead_left_s / 3600.0, then, holds_h,
                     np.random.default_rng(1), model.hop_per_h)
        best = int(np.argmin(costs))
        # "Never" is looked at again after the longest hold: a run of several zones' union can
        # last the whole job while the market it was judged on changes.
        self._plan = (key, ctx.market.tick + HOLD_TICKS[min(best, len(HOLD_TICKS) - 1)])
        return best == 0


def _job(ctx: Context, spot_usd_per_h: float) -> Job:
    # One tick is kept back: decisions are per tick, the futures are continuous.
    return Job((ctx.time_left_s - ctx.gap_s) / 3600.0, ctx.work_left_s / 3600.0, ctx.overhead_s / 3600.0,
               spot_usd_per_h, ctx.market.on_demand_usd_per_h(ctx.zones))


def _model(ctx: Context) -> RunModel:
    """The run model of the zone, or of the zones' union ("some zone is up") with its hop rate."""
    market, hours = ctx.market, ctx.gap_s / 3600.0
    if len(ctx.zones) == 1:
        z = ctx.zones[0]
        return RunModel(market.up_runs(z) * hours, market.down_runs(z) * hours, market.is_available(z),
                        market.run_ticks(z) * hours, 0.0)
    history = np.stack([market.history(z) for z in ctx.zones])
    union: np.ndarray = np.any(history, axis=0)
    starts = np.concatenate((np.zeros(1, dtype=int), np.flatnonzero(union[1:] != union[:-1]) + 1))
    lengths = np.diff(np.concatenate((starts, [union.size])))
    state = union[starts]
    done_up, done_down = lengths[:-1][state[:-1]], lengths[:-1][~state[:-1]]
    # Preemptions per up hour, each rate with the prior's pseudo-runs (one fall per up run). A
    # job that hops goes to the zone expected to stay up longest, so it sees about the steadiest
    # zone's rate; the falls of the union are outages, not hops.
    prior_falls, prior_h = PRIOR_RUNS, PRIOR_RUNS * PRIOR_UP_H
    zone_rates = ((history[:, :-1] & ~history[:, 1:]).sum(axis=1) + prior_falls) / (
        history.sum(axis=1) * hours + prior_h)
    union_rate = (int((union[:-1] & ~union[1:]).sum()) + prior_falls) / (float(union.sum()) * hours + prior_h)
    hop = max(0.0, float(zone_rates.min()) - union_rate)
    return RunModel(done_up * hours, done_down * hours, bool(union[-1]), float(lengths[-1]) * hours, hop)


