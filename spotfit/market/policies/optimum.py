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

import numpy as np

from spotfit.market.policies.base import BasePolicy, Context, Decision

_V, _N, _F, _SPOT, _OD = range(5)  # rows of a state's value block
_EPS = 1e-6


class Optimum(BasePolicy):
    name = "optimum"
    multi_zone = True
    offline = True

    def decide(self, ctx: Context) -> Decision:
        raise TypeError("optimum is offline: call solve(trace, job, start_tick, zones)")

    def solve(self, trace, job, start_tick: int, zones):
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


def solve_block(trace, job, start_tick: int, zones) -> np.ndarray | None:
    """Value block (cost, launches, finish_s, spot ticks, od ticks) of the optimal run, or None."""
    gap = int(trace.gap_s)
    overhead = int(round(job.overhead_s))
    if abs(overhead - job.overhead_s) > _EPS:
        raise ValueError(f"optimum needs whole seconds of overhead, got {job.overhead_s}")
    work, deadline = float(job.work_s), float(job.deadline_s)
    u = math.gcd(gap, overhead) if overhead else gap
    n_ticks = trace.n_ticks
    rows = [trace.zone_index(z) for z in zones]
    k_max = max(1, math.ceil(overhead / gap))
    gains = [gap - min(gap, max(0, overhead - k * gap)) for k in range(k_max + 1)]
    j_all = math.ceil(work / u - 1e-9)  # progress states j*u < work
    horizon = math.ceil(deadline / gap - 1e-9)
    n_modes = 1 + len(rows)  # 0: on-demand, 1..: spot in zones[i]

    def band(t: int) -> tuple[int, int]:
        lo = max(0, math.ceil((work - deadline + t * gap) / u - 1e-9))
        hi = min(j_all - 1, (t * gap) // u)
        return lo, hi

    empty = np.zeros((5, 0))
    nxt_lo, _ = band(horizon)
    nxt = {"none": empty, **{(c, k): empty for c in range(n_modes) for k in range(1, k_max + 1)}}

    for t in range(horizon - 1, -1, -1):
        lo, hi = band(t)
        m = hi - lo + 1
        if m <= 0:
            nxt = {key: empty for key in nxt}
            nxt_lo = lo
            continue
        a = min(start_tick + t, n_ticks - 1)
        inside = start_tick + t < n_ticks
        avail = [True] + [inside and bool(trace.available[r, a]) for r in rows]
        cost = [float(np.min(trace.on_demand_usd_per_h[rows, a])) * gap / 3600.0]
        cost += [float(trace.spot_usd_per_h[r, a]) * gap / 3600.0 for r in rows]
        js = np.arange(lo, hi + 1)

        def shift(block: np.ndarray, g: int) -> np.ndarray:
            out = np.zeros((5, m))
            out[_V] = np.inf
            gu = g // u
            done = js * u + g >= work - 1e-9
            if done.any():
                finish = t * gap + (gap - g) + (work - js[done] * u)
                ok = finish <= deadline + _EPS
                sub = out[:, done]
                sub[_V] = np.where(ok, 0.0, np.inf)
                sub[_F] = finish
                out[:, done] = sub
            nb = block.shape[1]
            first = max(lo, nxt_lo - gu)
            last = min(hi, nxt_lo + nb - 1 - gu, j_all - 1 - gu)
            if last >= first:
                out[:, first - lo:last - lo + 1] = block[:, first + gu - nxt_lo:last + gu - nxt_lo + 1]
            return out

        def billed(block: np.ndarray, c: int, launch: bool) -> np.ndarray:
            block[_V] += cost[c]
            block[_SPOT if c else _OD] += 1
            if launch:
                block[_N] += 1
            return block

        none = shift(nxt["none"], 0)
        launches = np.full((n_modes, 5, m), np.inf)
        for c in range(n_modes):
            if avail[c]:
                launches[c] = billed(shift(nxt[(c, 1)], gains[0]), c, True)
        first_choice = np.argmin(launches[:, _V], axis=0)
        best = np.take_along_axis(launches, first_choice[None, None, :].repeat(5, 1), 0)[0]
        masked = launches[:, _V].copy()
        np.put_along_axis(masked, first_choice[None, :], np.inf, 0)
        second_choice = np.argmin(masked, axis=0)
        second = np.take_along_axis(launches, second_choice[None, None, :].repeat(5, 1), 0)[0]

        cur = {"none": _pick(none, best)}
        for c in range(n_modes):
            if not avail[c]:
                for k in range(1, k_max + 1):
                    cur[(c, k)] = cur["none"]
                continue
            others = np.where(first_choice == c, second, best)
            idle_or_switch = _pick(none, others)
            for k in range(1, k_max + 1):
                stay = billed(shift(nxt[(c, min(k + 1, k_max))], gains[k]), c, False)
                cur[(c, k)] = _pick(idle_or_switch, stay)
        nxt, nxt_lo = cur, lo

    if nxt_lo != 0 or nxt["none"].shape[1] == 0 or not np.isfinite(nxt["none"][_V, 0]):
        return None
    return nxt["none"][:, 0]


def _pick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Column-wise the cheaper of two value blocks (ties keep `a`)."""
    return np.where(b[_V] < a[_V] - 1e-12, b, a)
