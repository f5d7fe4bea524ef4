"""`mdp`: the plan of least expected cost under a model of the zone's own past, solved exactly.

The zone's spot availability is modelled as alternating up and down runs (semi-Markov): the
chance that the current run ends within the next step depends on how long it has lasted, and
is estimated from the runs the zone completed so far (`_end_chances`, with two pseudo-runs of prior
lengths before there is history). A backward dynamic program over (steps left, work left, what
runs now, the run's state and age) then gives the expected cost of the cheapest way to finish
by the deadline, and the policy takes the action of least expected cost at each tick: wait
(only while spot is down), launch or keep spot, launch or keep on-demand. A launch adds the restart overhead to the work
left (its start-up is billed and makes no progress); a spot instance whose zone goes down is
preempted. There is no tuned reserve or threshold: whether an outage is waited out or bridged,
and when on-demand is left for spot, follows from the deadline, the overhead, the prices and the
run lengths seen so far. The deadline's safety rule (`safe_off_on_demand`) is kept on top, so
the model's errors cost money, never the deadline; a spot launch whose start-up that rule would
cut short is not made (`start_up_safe`).

While spot is up but the floor's chance bound holds its launch back, the job waits idle only if
the run, should it last, would be let go in time for a safe launch (`floor.proving_ticks`); else
it takes on-demand at once, as the program itself never waits while spot is up.

The program is solved on steps of `k` ticks (`MAX_WORK_STEPS`, `MAX_TIME_STEPS`) and solved
again when the zone completes a run (its model changed), at most once per `RESOLVE_STEPS`
steps. Its only numbers are the prior run lengths (`futures.PRIOR_*`, those of `spotfit` and
`rollout`) and the age buckets.

Several zones (`ctx.zones`) are one market, their union ("some zone is up", `_union_runs`):
a job riding spot whose zone falls while another is up hops there for one more launch, at a
rate per up step estimated from the past (the steadiest zone's falls while another zone is up,
per up tick, with the prior's pseudo-runs); a launch goes to the up zone with the lowest
effective price (spot price with the launch's overhead spread over the zone's expected rest of
up time). Chosen on the
February trace over `spotfit`'s rules for several zones and over one program per zone (figures
in docs/benchmarks.md, in-sample note). A job riding spot hops to a cheaper up zone when the
price saved over that zone's median rest of up time pays the launches of the hop
(`_cheaper_zone`).

Example:

>>> Mdp().name
'mdp'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

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
    start_up_safe,
    within_floor,
)
from spotfit.market.policies.floor import proving_ticks, risk_ok
from spotfit.market.policies.futures import PRIOR_DOWN_H, PRIOR_RUNS, PRIOR_UP_H
from spotfit.market.policies.spotfit import effective_usd_per_h, rest_h

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

    key: tuple[int | str, ...]
    value: np.ndarray  # float32, (T + 1, 3, W, 2 * _B); s = up * _B + age bucket
    trans: np.ndarray  # (S, S) step transition matrix of the availability phases
    k: int  # ticks per step
    overhead_steps: float
    spot_usd: float  # per step
    od_usd: float  # per step
    hop: float  # chance per step that a job riding spot must relaunch in another zone
    solved_tick: int


@dataclass(frozen=True, slots=True)
class _Runs:
    """What the program models: completed up and down runs (ticks), the current run, the spot
    price, and (several zones) how often a job riding spot must hop zones while spot stays up."""

    key: tuple[int | str, ...]
    up_ticks: np.ndarray
    down_ticks: np.ndarray
    up_now: bool
    age_ticks: int
    spot_usd_per_h: float
    hop_per_tick: float


class Mdp(BasePolicy):
    name = "mdp"
    multi_zone = True

    def reset(self) -> None:
        self._table: _Table | None = None

    def decide(self, ctx: Context) -> Decision:
        runs = _zone_runs(ctx) if len(ctx.zones) == 1 else _union_runs(ctx)
        mode, market = ctx.mode, ctx.market
        riding = mode.kind is Kind.SPOT and market.is_available(str(mode.zone))
        up = [z for z in ctx.zones if market.is_available(z)]
        if not self._floor_allows_spot(ctx, riding, up):
            return ON_DEMAND
        launchable = [z for z in up if within_floor(ctx, ctx.market.spot_usd_per_h(z), ctx.overhead_s)
                      and risk_ok(ctx, z, ctx.overhead_s)]
        spot_ok = bool(up if riding else launchable) and (safe_off_on_demand(ctx, gain_if_continued(ctx)) if riding else
                                safe_off_on_demand(ctx, gain_if_launched(ctx)) and start_up_safe(ctx))
        # Never idle while spot can be had, nor for a run the floor will not launch in time.
        idle_ok = not spot_ok and (riding or self._worth_proving(ctx, up, launchable)) and safe_off_on_demand(ctx, 0.0)
        if not (idle_ok or spot_ok):
            return ON_DEMAND
        q = self._q_values(ctx, runs, idle_ok, spot_ok, riding)
        # Ties go to what runs now (no launch for nothing), then to the cheaper resource.
        rank = {Kind.SPOT: 1, Kind.NONE: 2, Kind.ON_DEMAND: 3}
        best = min(q, key=lambda kind: (round(q[kind], 9), 0 if kind is mode.kind else rank[kind]))
        if best is Kind.SPOT and riding:
            return self._cheaper_zone(ctx, runs, launchable) or mode
        if best is Kind.SPOT:
            return spot(min(launchable, key=lambda z: effective_usd_per_h(ctx, z)))
        return ON_DEMAND if best is Kind.ON_DEMAND else NONE

    @staticmethod
    def _worth_proving(ctx: Context, up: list[str], launchable: list[str]) -> bool:
        """Whether waiting is still worth it while spot is up but the chance bound holds its
        launch back (`floor.risk_ok`): only if, should the run last, the bound lets the launch go
        while a launch still fits the deadline. The program waits only for spot it may launch
        (it never waits while spot is up); a wait that ends past the last safe launch buys
        nothing and spends the slack a switch off on-demand later needs."""
        if launchable or not up:
            return True
        # A launch after this many ticks of waiting still has its start-up and the on-demand
        # fallback fit by the deadline (`start_up_safe`, `safe_off_on_demand`).
        room = math.floor((ctx.slack_s - ctx.overhead_s) / ctx.gap_s + 1e-9)
        return room >= 0 and any(proving_ticks(ctx, z, ctx.overhead_s, room) is not None for z in up
                                 if within_floor(ctx, ctx.market.spot_usd_per_h(z), ctx.overhead_s))

    @staticmethod
    def _floor_allows_spot(ctx: Context, riding: bool, up: list[str]) -> bool:
        """The floor (`within_floor`): spot may still be ridden, or launched at the cheapest price
        it can be had now (the cheapest zone's, when none is up: waiting for spot that the floor
        will not let the job launch only loses time). Where it may not, the job finishes on
        on-demand: what it may still lose on spot is spent."""
        if riding:
            return within_floor(ctx, ctx.market.spot_usd_per_h(str(ctx.mode.zone)), ctx.overhead_left_s)
        price = min(ctx.market.spot_usd_per_h(z) for z in (up or ctx.zones))
        return within_floor(ctx, price, ctx.overhead_s)

    def _cheaper_zone(self, ctx: Context, runs: _Runs, up: list[str]) -> Decision | None:
        """Riding spot in one of several zones: hop to a cheaper up zone when the price saved over
        that zone's typical (median) rest of up time pays the launches the hop costs (this one, and the
        return when the new zone's run ends first), each valued by the program (its bill and
        the slack it spends)."""
        here = str(ctx.mode.zone)
        others = [z for z in up if z != here and ctx.market.spot_usd_per_h(z) < ctx.market.spot_usd_per_h(here)]
        if not others or not (safe_off_on_demand(ctx, gain_if_launched(ctx)) and start_up_safe(ctx)):
            return None
        launch_usd = self._launch_usd(ctx, runs)
        work_h = ctx.work_left_s / 3600.0
        rest_here = rest_h(ctx, here, typical=True)
        best, best_gain = None, 0.0
        for z in others:
            rest = min(rest_h(ctx, z, typical=True), work_h)
            saved = (ctx.market.spot_usd_per_h(here) - ctx.market.spot_usd_per_h(z)) * rest
            launches = 1.0 + rest_here / (rest_here + rest)  # the return, if this run ends first
            gain = saved - launches * launch_usd
            if gain > best_gain:
                best, best_gain = z, gain
        return spot(best) if best else None

    def _launch_usd(self, ctx: Context, runs: _Runs) -> float:
        """What one more launch of the spot instance costs now, in expected $ under the program."""
        now = self._now(ctx, runs)
        if now is None:
            return math.inf
        table, nxt, prob, step_s = now
        x = ctx.work_left_s / step_s + ctx.overhead_left_s / step_s - 1
        rows = _interp_rows(_spot_next(nxt), np.array([x, x + table.overhead_steps]))
        return float((rows[1] - rows[0]) @ prob)

    def _now(self, ctx: Context, runs: _Runs) -> tuple[_Table, np.ndarray, np.ndarray, float] | None:
        """The solved program read at this tick: the table, the values one step on (per mode), the
        chances of the next step's phases, the step in seconds; None with less than a step left."""
        table = self._solved(ctx, runs)
        step_s = table.k * ctx.gap_s
        t = min(int(math.floor(ctx.time_left_s / step_s + 1e-9)), table.value.shape[0] - 1)
        if t < 1:
            return None
        s = int(runs.up_now) * _B + _bucket(runs.age_ticks, table.k)
        return table, table.value[t - 1].astype(float), table.trans[s], step_s

    def _q_values(self, ctx: Context, runs: _Runs, idle_ok: bool, spot_ok: bool,
                  riding: bool) -> dict[Kind, float]:
        """Expected cost of each allowed action: this step's bill plus the expected value of the
        state it leads to, under the solved program."""
        now = self._now(ctx, runs)
        if now is None:
            return {Kind.ON_DEMAND: 0.0}
        table, nxt, prob, step_s = now

        def after(v: np.ndarray, w: float) -> float:
            return float(_interp_rows(v, np.array([w]))[0] @ prob)

        w = ctx.work_left_s / step_s
        o, left, mode = table.overhead_steps, ctx.overhead_left_s / step_s, ctx.mode.kind
        q = {Kind.ON_DEMAND: table.od_usd + after(nxt[_OD], w + (left if mode is Kind.ON_DEMAND else o) - 1)}
        if idle_ok and mode is not Kind.ON_DEMAND:  # a paid on-demand launch is kept (see _solve)
            q[Kind.NONE] = after(nxt[_IDLE], w)
        if spot_ok:
            spot_next = _spot_next(nxt)
            x = w + (left if riding else o) - 1
            q[Kind.SPOT] = table.spot_usd + (1 - table.hop) * after(spot_next, x) + table.hop * after(spot_next,
                                                                                                    x + o)
        return q

    def _solved(self, ctx: Context, runs: _Runs) -> _Table:
        k = max(1, math.ceil(ctx.work_s / ctx.gap_s / MAX_WORK_STEPS),
                math.ceil(ctx.deadline_s / ctx.gap_s / MAX_TIME_STEPS))
        table, tick = self._table, ctx.market.tick
        if table is not None and (table.key == runs.key or tick - table.solved_tick < RESOLVE_STEPS * k):
            return table
        step_s = k * ctx.gap_s
        tick_h = ctx.gap_s / 3600.0
        age_up, age_down = (runs.age_ticks, None) if runs.up_now else (None, runs.age_ticks)
        trans = _transitions(_end_chances(runs.up_ticks, age_up, PRIOR_UP_H / tick_h, k),
                             _end_chances(runs.down_ticks, age_down, PRIOR_DOWN_H / tick_h, k), k)
        steps = int(math.floor(ctx.time_left_s / step_s + 1e-9))
        work = int(math.ceil(ctx.work_left_s / step_s - 1e-9))
        overhead = ctx.overhead_s / step_s
        spot_usd = runs.spot_usd_per_h * step_s / 3600.0
        od_usd = ctx.market.on_demand_usd_per_h(ctx.zones) * step_s / 3600.0
        hop = 1.0 - (1.0 - runs.hop_per_tick) ** k
        value = _solve(steps, work + 2 * math.ceil(overhead) + 2, overhead, trans, spot_usd, od_usd, hop)
        self._table = _Table(runs.key, value, trans, k, overhead, spot_usd, od_usd, hop, tick)
        return self._table


def _zone_runs(ctx: Context) -> _Runs:
    market, zone = ctx.market, ctx.zones[0]
    ups, downs = market.up_runs(zone), market.down_runs(zone)
    return _Runs((ups.size, downs.size), ups, downs, market.is_available(zone), market.run_ticks(zone),
                 market.spot_usd_per_h(zone), 0.0)


def _union_runs(ctx: Context) -> _Runs:
    """The zones' union ("some zone is up") as one market; a job riding spot hops (one more
    launch) when its own zone falls while another is up. The hop rate is the steadiest zone's
    falls into a tick where another zone is up, per up tick of that zone (a hopping job goes
    where spot is expected to last; a fall with every zone down is the union's outage, not a
    hop), with the prior's pseudo-runs: without history, a fall per 4 h up, each a hop."""
    market = ctx.market
    history = np.stack([market.history(z) for z in ctx.zones])
    union: np.ndarray = np.any(history, axis=0)
    starts = np.concatenate((np.zeros(1, dtype=int), np.flatnonzero(union[1:] != union[:-1]) + 1))
    lengths = np.diff(np.concatenate((starts, [union.size])))
    state = union[starts]
    prior_falls, prior_ticks = PRIOR_RUNS, PRIOR_RUNS * PRIOR_UP_H * 3600.0 / ctx.gap_s
    others_up = history.sum(axis=0)[None, :] - history > 0
    hops = (history[:, :-1] & ~history[:, 1:] & others_up[:, 1:]).sum(axis=1)
    hop = float(((hops + prior_falls) / (history.sum(axis=1) + prior_ticks)).min())
    up = [z for z in ctx.zones if market.is_available(z)]
    price = min(market.spot_usd_per_h(z) for z in up) if up else float(
        np.median([market.spot_usd_per_h(z) for z in ctx.zones]))
    done_up, done_down = lengths[:-1][state[:-1]], lengths[:-1][~state[:-1]]
    return _Runs(("*", done_up.size, done_down.size), done_up, done_down, bool(union[-1]), int(lengths[-1]),
                 price, hop)


def _spot_next(nxt: np.ndarray) -> np.ndarray:
    """Values after a step on spot: riding on where spot is still up, idle (preempted) where not."""
    return cast(np.ndarray, np.where((np.arange(2 * _B) >= _B)[None, :], nxt[_SPOT], nxt[_IDLE]))


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
    return cast(np.ndarray, np.clip(ends / np.maximum(exposure, 1e-12), 0.0, 1.0))


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
    return _Interp(x, v.shape[0]).rows(v)


class _Interp:
    """`_interp_rows` at fixed `x` over `rows`-row tables: the indices and weights found once
    (`_solve` reads the same points of a new table at every step)."""

    def __init__(self, x: np.ndarray, rows: int):
        top = rows - 1
        xc = np.clip(x, 1.0, top)
        self.lo = np.minimum(np.floor(xc).astype(int), top - 1)
        self.hi = self.lo + 1
        f = (xc - self.lo)[:, None]
        self.f, self.g = f, 1.0 - f
        self.done = (x <= 1e-9)[:, None]

    def rows(self, v: np.ndarray) -> np.ndarray:
        return np.where(self.done, 0.0, v[self.lo] * self.g + v[self.hi] * self.f)


def _solve(steps: int, work: int, overhead: float, trans: np.ndarray, spot_usd: float,
           od_usd: float, hop: float = 0.0) -> np.ndarray:
    """Backward induction over t = 0..steps: V[t, mode, w, s] (see `_Table`)."""
    n_s = trans.shape[0]
    up = np.arange(n_s) >= _B
    miss = 10.0 * od_usd  # per work step unfinished at the deadline: never the cheaper way
    value = np.empty((steps + 1, 3, work, n_s), dtype=np.float32)
    w = np.arange(work, dtype=float)
    value[0] = (miss * (w + overhead))[None, :, None]
    value[0, :, 0] = 0.0
    run_x, launch_x = w - 1.0, w + overhead - 1.0
    run, launch = _Interp(run_x, work), _Interp(launch_x, work)
    run_hop, launch_hop = _Interp(run_x + overhead, work), _Interp(launch_x + overhead, work)
    tt = trans.T
    inf = np.inf
    for t in range(1, steps + 1):
        nxt = value[t - 1].astype(float)
        e_idle = nxt[_IDLE] @ tt
        e_od = nxt[_OD] @ tt
        e_spot = np.where(up[None, :], nxt[_SPOT], nxt[_IDLE]) @ tt
        od_run = od_usd + run.rows(e_od)
        od_launch = od_usd + launch.rows(e_od)
        sp_run, sp_launch = spot_usd + (1 - hop) * run.rows(e_spot), spot_usd + (1 - hop) * launch.rows(e_spot)
        if hop:  # without hops the terms add 0 (every value is finite): skipped, the sums unchanged
            sp_run, sp_launch = sp_run + hop * run_hop.rows(e_spot), sp_launch + hop * launch_hop.rows(e_spot)
        sp_run = np.where(up[None, :], sp_run, inf)
        sp_launch = np.where(up[None, :], sp_launch, inf)
        # While spot is up the job runs (spot or on-demand): waiting then only buys the hope of a
        # steadier run later, at the price of the job's time.
        wait = np.where(up[None, :], inf, e_idle)
        idle = np.minimum(np.minimum(wait, od_launch), sp_launch)
        value[t, _IDLE] = idle
        value[t, _SPOT] = np.where(up[None, :], np.minimum(od_launch, sp_run), idle)
        # On-demand runs until spot is taken again: stopping it to wait would throw away its
        # launch, and a model that changes between solves could otherwise flip it on and off.
        value[t, _OD] = np.minimum(od_run, sp_launch)
        value[t, :, 0] = 0.0
    return value
