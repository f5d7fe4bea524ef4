"""The default policy's floor: a hard bound on what a job pays above all-on-demand, and a chance
bound on paying more than all-on-demand at all.

Both are hedges against on-demand, measured from what the job has been billed so far
(`ctx.spent_usd`): going on-demand from the next tick always finishes, so a job is "covered" at a
level when what it has spent plus a fresh on-demand launch for the work left stays within that
level. A spot launch uncovers the job for a while: its start-up is billed and makes no progress,
and if the zone falls before the launch's progress has paid for it (its break-even), the job
ends above where it was covered.

- **The hard bound** (`within_floor`, `market.max_overpay`): a launch is made only when the job
  stays within (1 + max_overpay) × all-on-demand whenever it is preempted. `0` never risks paying
  more than on-demand in the model.
- **The chance bound** (`risk_ok`): a launch that could carry a job covered at all-on-demand above
  it is made only when the chance that the zone's current up run ends before the launch breaks
  even is at most `MAX_LOSS_CHANCE`. The chance is read from the zone's own completed up runs
  that lasted at least as long as the current one has (the online history, never the future),
  with `PRIOR_RUNS` pseudo-runs of the prior's mean length. A job no longer covered at on-demand
  (a launch already lost) has nothing left to protect at that level, and only the hard bound
  holds. This is the rent-or-buy trade made per launch: the start-up is rented only when the
  history says it is paid back with high probability; a ridden launch is never stopped for it
  (its start-up is spent).
- **A switch off on-demand needs evidence** (`loss_chance`): leaving a running on-demand launch for
  spot also forfeits that launch's paid start-up, so a lost switch costs several times what a lost
  launch from idle does (a second start-up, at the on-demand price). Where no up run in the
  zone's past lasted as long as the current one has (no evidence about runs this long, at the
  trace's start or in a run older than any seen), the chance for such a switch is not the
  geometric prior's, which February's run lengths shaped: it is the scale-free chance that a run
  of age `a` ends within `t` more ticks, `t / (a + t)` (Gott's delta-t argument: a run seen at a
  random moment of its life is as likely in its first as in its last part, whatever the scale).
  A young run then waits until its own age is the evidence. The same chance is what a memoryless
  run with an unknown rate (a flat prior on it) predicts from the time it has been seen up, so it
  needs no age: for a run up since the history began, whose age is only known to be at least
  what was seen, it reads the time seen, as it does for any other run. (The history's first run,
  whose length is only a lower bound, counts as a completed run: leaving it out, or counting it
  as censored, was tried and not kept; docs/benchmarks.md.)
- **Waiting for a run to prove itself** (`proving_ticks`, used by `mdp`): where the chance
  bound holds a launch back while spot is up, the job waits idle only while, should the run
  last, the bound would let the launch go in time for its start-up and the on-demand fallback to
  fit the deadline; otherwise it takes on-demand at once and leaves it later under the same
  bound. A wait that ends past the last safe launch only spends the slack (February's worst
  demo-sized window, 4 h at 1.2 × in us-east-1c from tick 12041: idle for 7 ticks, then
  on-demand throughout, 2.21 × the optimum; now 1.84).

`MAX_LOSS_CHANCE` was chosen on the February trace (bench/bench_floor.py); the August traces
shaped nothing (out of sample). The switch's scale-free chance has no constant; whether it applies
(`SWITCH_NEEDS_EVIDENCE`) was also decided on February. The wait for a run to prove itself has
no constant; it was found and checked on February (figures in docs/benchmarks.md).
"""

from __future__ import annotations

import math

import numpy as np

from spotfit.market.policies.base import Context, Kind, on_demand_usd
from spotfit.market.policies.futures import PRIOR_RUNS, PRIOR_UP_H

MAX_LOSS_CHANCE = 0.3  # a launch may fail to break even against on-demand with at most this chance
SWITCH_NEEDS_EVIDENCE = True  # a switch off on-demand without evidence reads the scale-free chance


def worst_if_lost(ctx: Context, price_usd_per_h: float, overhead_left_s: float, n: np.ndarray) -> np.ndarray:
    """The job's total if a launch at `price_usd_per_h` with `overhead_left_s` of start-up left is
    billed `n` ticks and then preempted, and on-demand does the rest (fresh launch, now's price)."""
    tick_usd = price_usd_per_h * ctx.gap_s / 3600.0
    left = ctx.work_left_s - np.maximum(0.0, n * ctx.gap_s - overhead_left_s)
    ticks = np.ceil((left + ctx.overhead_s) / ctx.gap_s - 1e-9)
    od = np.where(left <= 1e-9, 0.0, ctx.market.on_demand_usd_per_h(ctx.zones) * ticks * ctx.gap_s / 3600.0)
    spent = ctx.spent_usd or 0.0
    return spent + n * tick_usd + od


def break_even_ticks(ctx: Context, price_usd_per_h: float, overhead_left_s: float, bound_usd: float) -> int:
    """The fewest ticks the launch must be billed so that, preempted at any later tick, the job still
    ends within `bound_usd`: 0 when it does from the first tick; past the job's end when never."""
    last = math.ceil((ctx.work_left_s + overhead_left_s) / ctx.gap_s - 1e-9)
    n = np.arange(1, last + 1, dtype=float)
    over = worst_if_lost(ctx, price_usd_per_h, overhead_left_s, n) > bound_usd + 1e-9
    if not over.any():
        return 0
    return int(np.flatnonzero(over)[-1]) + 2  # billed one tick past the last uncovered one


def loss_chance(ctx: Context, zone: str, ticks: int, later: int = 0) -> float:
    """The chance that `zone`'s current up run ends within `ticks` more ticks, from its completed
    up runs that lasted at least its current age, and `PRIOR_RUNS` geometric pseudo-runs; for a
    switch off on-demand with no such run, the scale-free `(ticks - 1) / (age + ticks - 1)`.
    `later`: the same, read `later` ticks from now if the run lasts until then."""
    if ticks <= 0:
        return 0.0
    age = ctx.market.run_ticks(zone) + later
    runs = ctx.market.up_runs(zone)
    survived = runs[runs >= age]
    if survived.size == 0 and ctx.mode.kind is Kind.ON_DEMAND and SWITCH_NEEDS_EVIDENCE:
        return (ticks - 1) / (age + ticks - 1)
    lost = float(np.count_nonzero(survived < age + ticks - 1))
    q = min(1.0, ctx.gap_s / (PRIOR_UP_H * 3600.0))
    prior_lost = PRIOR_RUNS * (1.0 - (1.0 - q) ** (ticks - 1))
    return (lost + prior_lost) / (survived.size + 1 + PRIOR_RUNS)  # the current run: survived, censored


def covered_usd(ctx: Context) -> float:
    """What the job ends up paying if it finishes on on-demand from now: spent, plus the work left
    on the running on-demand launch (its start-up left), or on a fresh one."""
    if ctx.mode.kind is not Kind.ON_DEMAND:
        return (ctx.spent_usd or 0.0) + on_demand_usd(ctx, ctx.work_left_s)
    ticks = math.ceil((ctx.work_left_s + ctx.overhead_left_s) / ctx.gap_s - 1e-9)
    return (ctx.spent_usd or 0.0) + ctx.market.on_demand_usd_per_h(ctx.zones) * ticks * ctx.gap_s / 3600.0


def risk_ok(ctx: Context, zone: str, overhead_left_s: float) -> bool:
    """The chance bound (module docstring) for running spot in `zone` now with `overhead_left_s`
    of start-up left. True where `ctx` gives no spend or no bound."""
    return proving_ticks(ctx, zone, overhead_left_s, 0) == 0


def proving_ticks(ctx: Context, zone: str, overhead_left_s: float, most: int) -> int | None:
    """How many more ticks `zone`'s up run must last before the chance bound lets the launch go
    (0: now), with nothing else changed (the job waiting, unbilled); None if more than `most`."""
    if ctx.spent_usd is None or ctx.max_overpay is None or math.isinf(ctx.max_overpay):
        return 0
    bound, covered = on_demand_usd(ctx, ctx.work_s), covered_usd(ctx)
    if covered > bound + ctx.market.on_demand_usd_per_h(ctx.zones) * ctx.gap_s / 3600.0 + 1e-9:
        return 0  # not covered at on-demand any more: only the hard bound holds
    price = ctx.market.spot_usd_per_h(zone)
    need = break_even_ticks(ctx, price, overhead_left_s, max(bound, covered))
    return next((w for w in range(most + 1) if loss_chance(ctx, zone, need, w) <= MAX_LOSS_CHANCE), None)
