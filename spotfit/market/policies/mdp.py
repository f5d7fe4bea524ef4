"""`mdp`: the plan of least expected cost under a model of the zone's own past, solved exactly.

The zone's spot availability is modelled as alternating up and down runs (semi-Markov): the
chance that the current run ends within the next step depends on how long it has lasted, and
is estimated from the runs the zone completed so far (`_end_chances`, with two pseudo-runs of prior
lengths before there is history). A backward dynamic program over (steps left, work left, what
runs now, the run's state and age) then gives the expected cost of the cheapest way to finish
by the deadline, and the policy takes the action of least expected cost at each tick: wait,
launch or keep spot, launch or keep on-demand. A launch adds the restart overhead to the work
left (its start-up is billed and makes no progress); a spot instance whose zone goes down is
preempted. There is no tuned reserve or threshold: whether an outage is waited out or bridged,
and when on-demand is left for spot, follows from the deadline, the overhead, the prices and the
run lengths seen so far. The deadline's safety rule (`safe_off_on_demand`) is kept on top, so
the model's errors cost money, never the deadline.

The program is solved on steps of `k` ticks (`MAX_WORK_STEPS`, `MAX_TIME_STEPS`) and solved
again when the zone completes a run (its model changed), at most once per `RESOLVE_STEPS`
steps. Its only numbers are the prior run lengths (`futures.PRIOR_*`, those of `spotfit` and
`rollout`) and the age buckets.

Several zones (`ctx.zones`) are decided by `spotfit`'s rules. Two programs for several zones
were tried on the February trace and not kept: one per zone, taking the cheapest action over the
zones (multi-zone mean over the five deadline ratios 1.105 × the optimum, 3 starts, against
`spotfit`'s 1.032), and one over the zones' union with a hop rate, as `rollout` models it (1.060
against 1.041, 6 starts).

Example:

>>> Mdp().name
'mdp'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from spotfit.market.policies.base import (
    NONE,
    ON_DEMAND,
    Context,
    Decision,
    Kind,
    gain_if_continued,
    gain_if_launched,
    safe_off_on_demand,
    spot,
)
from spotfit.market.policies.futures import PRIOR_DOWN_H, PRIOR_RUNS, PRIOR_UP_H
from spotfit.market.policies.spotfit import Spotfit

# A step is the fewest whole ticks that keep the work grid this fine and the time grid this
# long (the solved table is 3 × 18 × work steps × time steps floats: under 50 MB).
MAX_WORK_STEPS, MAX_TIME_STEPS = 240, 960
RESOLVE_STEPS = 4  # a changed model is solved again at most once per this many steps
# Lower edges (in steps) of the run-age buckets; the last bucket is open. A run's hazard is
# taken constant within a bucket (the age advances to the next bucket at the bucket's pace).
AGE_EDGES_STEPS = (0, 1, 2, 4, 8, 16, 32, 64, 128)
_B = len(AGE_EDGES_STEPS)
_IDLE, _SPOT, _OD = 0, 1, 2


@dataclass(frozen=True, slots=True)
class _Table:
    """A solved program: V[t, mode, w, s] = expected cost to finish w work steps in t steps."""

    key: tuple
    value: np.ndarray  # float32, (T + 1, 3, W, 2 * _B); s = up * _B + age bucket
    trans: np.ndarray  # (S, S) step transition matrix of the availability phases
    k: int  # ticks per step
    overhead_steps: float
    spot_usd: float  # per step
    od_usd: float  # per step
    solved_tick: int


class Mdp(Spotfit):
    """`spotfit` for several zones; one zone's choices come from the solved program."""

    name = "mdp"
    multi_zone = True

    def reset(self) -> None:
        self._table: _Table | None = None

    def decide(self, ctx: Context) -> Decision:
        if len(ctx.zones) > 1:
            return super().decide(ctx)
        zone, mode = ctx.zones[0], ctx.mode
        up = ctx.market.is_available(zone)
        idle_ok = safe_off_on_demand(ctx, 0.0)
        spot_ok = up and safe_off_on_demand(ctx, gain_if_continued(ctx) if mode.kind is Kind.SPOT
                                            else gain_if_launched(ctx))
        if not (idle_ok or spot_ok):
            return ON_DEMAND
        q = self._q_values(ctx, idle_ok, spot_ok)
        # Ties go to what runs now (no launch for nothing), then to the cheaper resource.
        rank = {Kind.SPOT: 1, Kind.NONE: 2, Kind.ON_DEMAND: 3}
        best = min(q, key=lambda kind: (round(q[kind], 9), 0 if kind is mode.kind else rank[kind]))
        return {Kind.SPOT: spot(zone), Kind.NONE: NONE, Kind.ON_DEMAND: ON_DEMAND}[best]

    def _q_values(self, ctx: Context, idle_ok: bool, spot_ok: bool) -> dict[Kind, float]:
        """Expected cost of each allowed action: this step's bill plus the expected value of the
        state it leads to, under the solved program."""
        zone = ctx.zones[0]
        table = self._solved(ctx, zone)
        step_s = table.k * ctx.gap_s
        t = min(int(math.floor(ctx.time_left_s / step_s + 1e-9)), table.value.shape[0] - 1)
        if t < 1:
            return {Kind.ON_DEMAND: 0.0}
        s = int(ctx.market.is_available(zone)) * _B + _bucket(ctx.market.run_ticks(zone), table.k)
        nxt = table.value[t - 1].astype(float)
        prob = table.trans[s]

        def after(v: np.ndarray, w: float) -> float:
            return float(_interp_rows(v, np.array([w]))[0] @ prob)

        w = ctx.work_left_s / step_s
        o, left, mode = table.overhead_steps, ctx.overhead_left_s / step_s, ctx.mode.kind
        q = {Kind.ON_DEMAND: table.od_usd + after(nxt[_OD], w + (left if mode is Kind.ON_DEMAND else o) - 1)}
        if idle_ok and mode is not Kind.ON_DEMAND:  # a paid on-demand launch is kept (see _solve)
            q[Kind.NONE] = after(nxt[_IDLE], w)
        if spot_ok:
            spot_next = np.where((np.arange(2 * _B) >= _B)[None, :], nxt[_SPOT], nxt[_IDLE])
            q[Kind.SPOT] = table.spot_usd + after(spot_next, w + (left if mode is Kind.SPOT else o) - 1)
        return q

    def _solved(self, ctx: Context, zone: str) -> _Table:
        market = ctx.market
        k = max(1, math.ceil(ctx.work_s / ctx.gap_s / MAX_WORK_STEPS),
                math.ceil(ctx.deadline_s / ctx.gap_s / MAX_TIME_STEPS))
        ups, downs = market.up_runs(zone), market.down_runs(zone)
        key = (ups.size, downs.size)
        table = self._table
        if table is not None and (table.key == key or market.tick - table.solved_tick < RESOLVE_STEPS * k):
            return table
        step_s = k * ctx.gap_s
        tick_h = ctx.gap_s / 3600.0
        up_now, age = market.is_available(zone), market.run_ticks(zone)
        trans = _transitions(_end_chances(ups, age if up_now else None, PRIOR_UP_H / tick_h, k),
                             _end_chances(downs, None if up_now else age, PRIOR_DOWN_H / tick_h, k), k)
        steps = int(math.floor(ctx.time_left_s / step_s + 1e-9))
        work = int(math.ceil(ctx.work_left_s / step_s - 1e-9))
        overhead = ctx.overhead_s / step_s
        spot_usd = market.spot_usd_per_h(zone) * step_s / 3600.0
        od_usd = market.on_demand_usd_per_h(ctx.zones) * step_s / 3600.0
        value = _solve(steps, work + math.ceil(overhead) + 2, overhead, trans, spot_usd, od_usd)
        self._table = _Table(key, value, trans, k, overhead, spot_usd, od_usd, market.tick)
        return self._table


def _edges_ticks(k: int) -> np.ndarray:
    """Lower edges of the age buckets in ticks (a run is 1 tick old in its first tick)."""
    return np.array([1, *(k * e + 1 for e in AGE_EDGES_STEPS[1:])], dtype=float)


def _bucket(age_ticks: int, k: int) -> int:
    return int(np.searchsorted(_edges_ticks(k), age_ticks, side="right")) - 1


def _end_chances(lengths_ticks: np.ndarray, age_ticks: int | None, prior_ticks: float, k: int) -> np.ndarray:
    """Per bucket, the chance that a run ends after any one tick of the bucket: the runs that
    ended there over the ticks runs spent there (completed runs, and the current one censored at
    its age), plus `PRIOR_RUNS` geometric pseudo-runs of mean `prior_ticks`."""
    lo = _edges_ticks(k)
    hi = np.append(lo[1:], np.inf)
    lengths = np.asarray(lengths_ticks, dtype=float)[:, None]
    exposure = np.clip(np.minimum(lengths, hi - 1) - lo + 1, 0.0, None).sum(axis=0)
    ends = ((lengths >= lo) & (lengths < hi)).sum(axis=0).astype(float)
    if age_ticks is not None:
        exposure += np.clip(np.minimum(age_ticks - 1, hi - 1) - lo + 1, 0.0, None)
    q = 1.0 / max(prior_ticks, 1.0)
    reach_lo = (1.0 - q) ** (lo - 1)
    reach_hi = np.where(np.isinf(hi), 0.0, (1.0 - q) ** (np.where(np.isinf(hi), 0.0, hi) - 1))
    exposure += PRIOR_RUNS * (reach_lo - reach_hi) / q
    ends += PRIOR_RUNS * (reach_lo - reach_hi)
    return np.clip(ends / np.maximum(exposure, 1e-12), 0.0, 1.0)


def _transitions(up_end: np.ndarray, down_end: np.ndarray, k: int) -> np.ndarray:
    """One step (k ticks) of the phases: a run ends (to the other state's first bucket), its age
    moves to the next bucket at the bucket's pace, or it stays."""
    lo = _edges_ticks(k)
    widths = np.diff(np.append(lo, np.inf))
    trans = np.zeros((2 * _B, 2 * _B))
    for state, chance in ((0, down_end), (1, up_end)):
        end = 1.0 - (1.0 - chance) ** k
        for b in range(_B):
            s = state * _B + b
            trans[s, (1 - state) * _B] = end[b]
            move = (1.0 - end[b]) * min(1.0, k / widths[b]) if b + 1 < _B else 0.0
            if move:
                trans[s, s + 1] = move
            trans[s, s] += 1.0 - end[b] - move
    return trans


def _interp_rows(v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rows of `v` (work index × phases) at fractional work indices `x` (clipped to the grid).
    At or below 0 the job is done and costs nothing more; any work left costs at least a whole
    step (a billed tick is billed in full), so (0, 1) reads row 1."""
    top = v.shape[0] - 1
    xc = np.clip(x, 1.0, top)
    i = np.minimum(np.floor(xc).astype(int), top - 1)
    f = (xc - i)[:, None]
    rows = v[i] * (1.0 - f) + v[i + 1] * f
    return np.where((x <= 1e-9)[:, None], 0.0, rows)


def _solve(steps: int, work: int, overhead: float, trans: np.ndarray, spot_usd: float,
           od_usd: float) -> np.ndarray:
    """Backward induction over t = 0..steps: V[t, mode, w, s] (see `_Table`)."""
    n_s = trans.shape[0]
    up = np.arange(n_s) >= _B
    miss = 10.0 * od_usd  # per work step unfinished at the deadline: never the cheaper way
    value = np.empty((steps + 1, 3, work, n_s), dtype=np.float32)
    w = np.arange(work, dtype=float)
    value[0] = (miss * (w + overhead))[None, :, None]
    value[0, :, 0] = 0.0
    run_x, launch_x = w - 1.0, w + overhead - 1.0
    tt = trans.T
    inf = np.inf
    for t in range(1, steps + 1):
        nxt = value[t - 1].astype(float)
        e_idle = nxt[_IDLE] @ tt
        e_od = nxt[_OD] @ tt
        e_spot = np.where(up[None, :], nxt[_SPOT], nxt[_IDLE]) @ tt
        od_run = od_usd + _interp_rows(e_od, run_x)
        od_launch = od_usd + _interp_rows(e_od, launch_x)
        sp_run = np.where(up[None, :], spot_usd + _interp_rows(e_spot, run_x), inf)
        sp_launch = np.where(up[None, :], spot_usd + _interp_rows(e_spot, launch_x), inf)
        idle = np.minimum(np.minimum(e_idle, od_launch), sp_launch)
        value[t, _IDLE] = idle
        value[t, _SPOT] = np.where(up[None, :], np.minimum(np.minimum(e_idle, od_launch), sp_run), idle)
        # On-demand runs until spot is taken again: stopping it to wait would throw away its
        # launch, and a model that changes between solves could otherwise flip it on and off.
        value[t, _OD] = np.minimum(od_run, sp_launch)
        value[t, :, 0] = 0.0
    return value
