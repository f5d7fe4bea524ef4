"""`optimum`: the cheapest schedule that meets the deadline, knowing the whole trace (offline).

A backward dynamic program over (tick, progress, mode, ticks into the current launch), exact
under the simulator's rules because every quantity is a multiple of u = gcd(gap, overhead)
seconds: progress moves in steps of u, and the start-up still owed after k ticks of a launch is
max(0, overhead - k·gap). The work and deadline need not be multiples of u: the last tick's
finish time is computed in seconds. Progress is vectorised with numpy and limited to the band
of states that can still finish (progress >= work - time left) and that time allows
(progress <= elapsed time), so a 52-hour V100 job solves in a fraction of a second.

Each state carries, besides its cost, the launches, finish time and billed spot and on-demand
ticks of its best continuation, so the run's figures come out of the same pass. The optimum
never needs to be preempted (it can always leave a zone at the tick it goes down at the same
price), so its runs report `preemptions=0`.

Example:

>>> from spotfit.market.trace import load_trace
>>> from spotfit.market.simulator import Job
>>> trace = load_trace("aws-v100").select(["us-west-2b"])
>>> run = Optimum().solve(trace, Job.from_hours(48, 52, 0.2), 0, trace.zones)
>>> run.met_deadline, run.cost_usd < 50
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from spotfit.market import stopping
from spotfit.market.policies.base import BasePolicy, Context, Decision

if TYPE_CHECKING:
    from spotfit.market.simulator import Job, RunResult
    from spotfit.market.trace import Trace

_V, _N, _F, _SPOT, _OD = range(5)  # rows of a state's value block
_EPS = 1e-6

# Value blocks keyed "none" (not running) or (mode, ticks into the launch).
_Values = dict[str | tuple[int, int], np.ndarray]


class Optimum(BasePolicy):
    name = "optimum"
    multi_zone = True
    offline = True

    def decide(self, ctx: Context) -> Decision:
        raise TypeError("optimum is offline: call solve(trace, job, start_tick, zones)")

    def solve(self, trace: Trace, job: Job, start_tick: int, zones: Sequence[str]) -> RunResult:
        """The optimal run from `start_tick` over `zones` (one zone or several together)."""
        from spotfit.market.simulator import RunResult, simulate

        zones = tuple(zones)
        label = zones[0] if len(zones) == 1 else "*"
        best = solve_block(trace, job, start_tick, zones)
        if best is None:  # not even the optimum makes the deadline: on-demand is then the best try
            run = simulate("on_demand", trace, job, start_tick, zones)
            return RunResult("optimum", label, start_tick, run.cost_usd, False, run.finish_h,
                             run.launches, 0, run.spot_h, run.on_demand_h)
        hours = trace.gap_s / 3600.0
        return RunResult("optimum", label, start_tick, float(best[_V]), True,
                         float(best[_F]) / 3600.0, int(best[_N]), 0,
                         float(best[_SPOT]) * hours, float(best[_OD]) * hours)


def solve_block(trace: Trace, job: Job, start_tick: int, zones: Sequence[str]) -> np.ndarray | None:
    """Value block (cost, launches, finish_s, spot ticks, od ticks) of the optimal run, or None."""
    grid = _grid(trace.gap_s, job, n_zones=len(zones))
    rows = [trace.zone_index(z) for z in zones]
    nxt_lo, _ = grid.band(grid.horizon)
    nxt = _empty_values(grid)
    for t in range(grid.horizon - 1, -1, -1):
        if t % stopping.EVERY == 0:
            stopping.check()
        lo, hi = grid.band(t)
        if hi < lo:  # no progress state can still finish in time
            nxt, nxt_lo = _empty_values(grid), lo
            continue
        tick = _tick(trace, rows, start_tick, t, lo, hi)
        nxt, nxt_lo = _step(grid, tick, nxt, nxt_lo), lo
    if nxt_lo != 0 or nxt["none"].shape[1] == 0 or not np.isfinite(nxt["none"][_V, 0]):
        return None
    return nxt["none"][:, 0]


@dataclass(frozen=True)
class _Grid:
    """The DP's fixed quantities; progress is counted in units of `unit_s` seconds."""

    gap_s: int
    unit_s: int
    work_s: float
    deadline_s: float
    n_progress: int  # progress states j·unit_s < work_s
    horizon: int  # ticks until the deadline
    k_max: int  # ticks into a launch after which no start-up is owed
    gains_s: tuple[int, ...]  # progress made in the k-th tick of a launch (k = 0..k_max)
    n_modes: int  # 0: on-demand, 1..: spot in zones[i - 1]

    def band(self, t: int) -> tuple[int, int]:
        """Progress states at tick `t` that can still finish (lo) and that time allows (hi)."""
        lo = max(0, math.ceil((self.work_s - self.deadline_s + t * self.gap_s) / self.unit_s - 1e-9))
        hi = min(self.n_progress - 1, (t * self.gap_s) // self.unit_s)
        return lo, hi


@dataclass(frozen=True)
class _Tick:
    """One tick of the pass: its band of progress states and each mode's market."""

    t: int
    lo: int
    js: np.ndarray  # progress states lo..hi
    available: list[bool]  # per mode
    cost_usd: list[float]  # per mode, for one tick


def _grid(gap_s: int, job: Job, n_zones: int) -> _Grid:
    gap = int(gap_s)
    overhead = int(round(job.overhead_s))
    if abs(overhead - job.overhead_s) > _EPS:
        raise ValueError(f"optimum needs whole seconds of overhead, got {job.overhead_s}")
    work, deadline = float(job.work_s), float(job.deadline_s)
    u = math.gcd(gap, overhead) if overhead else gap
    k_max = max(1, math.ceil(overhead / gap))
    return _Grid(
        gap_s=gap, unit_s=u, work_s=work, deadline_s=deadline,
        n_progress=math.ceil(work / u - 1e-9),
        horizon=math.ceil(deadline / gap - 1e-9),
        k_max=k_max,
        gains_s=tuple(gap - min(gap, max(0, overhead - k * gap)) for k in range(k_max + 1)),
        n_modes=1 + n_zones,
    )


def _empty_values(grid: _Grid) -> _Values:
    """Value blocks keyed "none" (not running) or (mode, ticks into the launch), all empty."""
    empty = np.zeros((5, 0))
    return {"none": empty, **{(c, k): empty for c in range(grid.n_modes) for k in range(1, grid.k_max + 1)}}


def _tick(trace: Trace, rows: list[int], start_tick: int, t: int, lo: int, hi: int) -> _Tick:
    """Tick `t` of the run; past the trace's end spot is down and prices stay at the last tick's."""
    gap = int(trace.gap_s)
    a = min(start_tick + t, trace.n_ticks - 1)
    inside = start_tick + t < trace.n_ticks
    available = [True] + [inside and bool(trace.available[r, a]) for r in rows]
    cost = [float(np.min(trace.on_demand_usd_per_h[rows, a])) * gap / 3600.0]
    cost += [float(trace.spot_usd_per_h[r, a]) * gap / 3600.0 for r in rows]
    return _Tick(t=t, lo=lo, js=np.arange(lo, hi + 1), available=available, cost_usd=cost)


def _step(grid: _Grid, tick: _Tick, nxt: _Values, nxt_lo: int) -> _Values:
    """The value blocks at `tick` from those of the next tick (which start at progress `nxt_lo`)."""
    none = _shift(grid, tick, nxt["none"], nxt_lo, 0)
    launches = _launches(grid, tick, nxt, nxt_lo)
    first_choice, best, second = _best_two(launches)
    cur: _Values = {"none": _pick(none, best)}
    for c in range(grid.n_modes):
        if not tick.available[c]:
            for k in range(1, grid.k_max + 1):
                cur[(c, k)] = cur["none"]
            continue
        others = np.where(first_choice == c, second, best)
        idle_or_switch = _pick(none, others)
        for k in range(1, grid.k_max + 1):
            stay = _billed(_shift(grid, tick, nxt[(c, min(k + 1, grid.k_max))], nxt_lo, grid.gains_s[k]),
                           tick.cost_usd[c], c, launch=False)
            cur[(c, k)] = _pick(idle_or_switch, stay)
    return cur


def _launches(grid: _Grid, tick: _Tick, nxt: _Values, nxt_lo: int) -> np.ndarray:
    """Per mode, the value of launching in it at `tick` (inf where the mode is unavailable)."""
    launches = np.full((grid.n_modes, 5, tick.js.size), np.inf)
    for c in range(grid.n_modes):
        if tick.available[c]:
            launches[c] = _billed(_shift(grid, tick, nxt[(c, 1)], nxt_lo, grid.gains_s[0]),
                                  tick.cost_usd[c], c, launch=True)
    return launches


def _best_two(launches: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per progress state: the cheapest launch's mode, its block, and the runner-up's block."""
    first_choice = np.argmin(launches[:, _V], axis=0)
    best = np.take_along_axis(launches, first_choice[None, None, :].repeat(5, 1), 0)[0]
    masked = launches[:, _V].copy()
    np.put_along_axis(masked, first_choice[None, :], np.inf, 0)
    second_choice = np.argmin(masked, axis=0)
    second = np.take_along_axis(launches, second_choice[None, None, :].repeat(5, 1), 0)[0]
    return first_choice, best, second


def _shift(grid: _Grid, tick: _Tick, block: np.ndarray, block_lo: int, gain_s: int) -> np.ndarray:
    """Values at `tick` of making `gain_s` of progress, given the next tick's `block` (from `block_lo`)."""
    u, work, lo, js = grid.unit_s, grid.work_s, tick.lo, tick.js
    hi = lo + js.size - 1
    out = np.zeros((5, js.size))
    out[_V] = np.inf
    gu = gain_s // u
    done = js * u + gain_s >= work - 1e-9
    if done.any():  # finishing within this tick: the finish time is exact, in seconds
        finish = tick.t * grid.gap_s + (grid.gap_s - gain_s) + (work - js[done] * u)
        ok = finish <= grid.deadline_s + _EPS
        sub = out[:, done]
        sub[_V] = np.where(ok, 0.0, np.inf)
        sub[_F] = finish
        out[:, done] = sub
    nb = block.shape[1]
    first = max(lo, block_lo - gu)
    last = min(hi, block_lo + nb - 1 - gu, grid.n_progress - 1 - gu)
    if last >= first:
        out[:, first - lo:last - lo + 1] = block[:, first + gu - block_lo:last + gu - block_lo + 1]
    return out


def _billed(block: np.ndarray, cost_usd: float, mode: int, launch: bool) -> np.ndarray:
    """`block` (changed in place) plus one billed tick in `mode`, and one launch if `launch`."""
    block[_V] += cost_usd
    block[_SPOT if mode else _OD] += 1
    if launch:
        block[_N] += 1
    return block


def _pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Column-wise the cheaper of two value blocks (ties keep `a`)."""
    return np.where(b[_V] < a[_V] - 1e-12, b, a)
