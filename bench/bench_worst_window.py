"""Benchmark what any online policy can reach on the worst windows (issue 36, "the worst window is
at most 1.5 × the optimum"): lower bounds on cost ÷ the hindsight optimum, window by window.

An online policy that guarantees the deadline (the default policy does: `safe_off_on_demand`)
must, after every tick it ends off on-demand, still be able to finish on on-demand launched at
the next tick: spot may vanish from the next tick on, and the policy cannot tell that future from
the one that happens (its past is the same). Two bounds follow, both exact dynamic programs over
the window's ticks in the simulator's accounting (a fresh launch pays the restart overhead, a
billed tick is billed in full, spot is preempted at the first tick its zone is down):

- **deadline-safe hindsight**: the cheapest run of the window that knows the future but keeps
  that fallback at every tick. No online policy that guarantees the deadline pays less in that
  window, whatever it knows: where this is above 1.5 × the optimum, the criterion cannot be met
  there by any such policy.
- **spot-vanishes minimax**: the smallest ρ for which one sequence of decisions costs at most
  ρ × the optimum in the window and, for every tick j, at most ρ × the optimum of the variant in
  which spot vanishes from tick j on (same past up to j; finishing on on-demand from j). No
  deterministic online policy that guarantees the deadline does better than ρ on both the
  window and its variants: a policy below ρ here pays more than ρ × the optimum on a trace with
  the same past. It is shown for the default policy's worst windows.

The unconstrained program is checked against the simulator's optimum on every window, and the
default policy's cost against the deadline-safe bound (a policy below it would mean the bound is
wrong). Windows are bench_floor.py's demo-sized jobs on every trace; `--grid` adds its 48 h grid
(a 48 h window's programs take seconds to minutes each: hours on a shared 2-core machine). Writes
the section `## The worst window: what an online policy can reach (issue 36)` of
docs/benchmarks.md.

    .venv/bin/python bench/bench_worst_window.py --workers 2
    .venv/bin/python bench/bench_worst_window.py --no-write --set out --grid
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import os
import time
from dataclasses import replace

import numpy as np
from _doc import machine, write_section
from bench_floor import DEMO_JOBS, DEMO_STARTS, GRID_RATIOS, GRID_STARTS, IN_SAMPLE, OUT_OF_SAMPLE, price_ratios

from spotfit.market.policies.base import DEFAULT_POLICY
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import Trace, load_trace

HEADING = "## The worst window: what an online policy can reach (issue 36)"
TARGET = 1.5  # issue 36: the worst window at most this × the optimum
MINIMAX_WORST = 2  # the default policy's worst windows per trace and family that get the minimax bound
VANISH_EVERY_H = 2.0  # 48 h windows: a variant every this many hours (every tick for demo-sized jobs)


def hindsight_usd(trace: Trace, job: Job, start: int, zones: tuple[str, ...], safe: bool,
                  vanish: dict[int, float] | None = None, rho: float = math.inf) -> float:
    """The cheapest cost of the window that knows the future (inf: none meets the deadline).

    `safe`: after every tick that ends off on-demand, on-demand launched at the next tick must still
    finish by the deadline. `vanish` {tick j: that variant's optimum}: a state at tick j must finish
    on on-demand from j within `rho` × the variant's optimum (the spot-vanishes minimax)."""
    gap = trace.gap_s
    unit = functools.reduce(math.gcd, [gap, round(job.overhead_s), round(job.work_s), round(job.deadline_s)])
    g, o, w, d = gap // unit, round(job.overhead_s) // unit, round(job.work_s) // unit, round(job.deadline_s) // unit
    ages = math.ceil(o / g)  # ticks into a launch after which its start-up is paid
    rows = [trace.zone_index(z) for z in zones]
    modes = 2 + len(rows)  # 0 idle, 1 on-demand, 2... spot in zones[m - 2]
    done = np.arange(w)
    value = np.full((modes, ages + 1, w), np.inf)  # cost so far by (mode, launch age, work done)
    value[0, 0, 0] = 0.0
    best = math.inf
    t = 0
    while t * g < d and start + t < trace.n_ticks:
        a = start + t
        od = float(np.min(trace.on_demand_usd_per_h[rows, a])) * gap / 3600.0
        up = [bool(trace.available[r, a]) for r in rows]
        if vanish is not None and t in vanish:
            for m in range(modes):
                for k in range(ages + 1):
                    left = max(0, o - k * g) if m == 1 else o
                    ok = t * g + left + (w - done) <= d
                    finish = np.where(ok, np.ceil((w - done + left) / g - 1e-12) * od, np.inf)
                    value[m, k] = np.where(value[m, k] + finish <= rho * vanish[t] + 1e-9, value[m, k], np.inf)
        for j, is_up in enumerate(up):
            if not is_up:  # preempted: idle at no cost
                value[0, 0] = np.minimum(value[0, 0], value[2 + j].min(axis=0))
                value[2 + j] = np.inf
        nxt = np.full_like(value, np.inf)
        by_mode = value.min(axis=1)
        wait_ok = (t + 1) * g + o + (w - done) <= d if safe else np.ones(w, dtype=bool)
        nxt[0, 0] = np.minimum(nxt[0, 0], np.where(wait_ok, by_mode.min(axis=0), np.inf))
        for m in range(1, modes):
            if m >= 2 and not up[m - 2]:
                continue
            price = od if m == 1 else float(trace.spot_usd_per_h[rows[m - 2], a]) * gap / 3600.0
            for k in range(ages + 1):
                if np.isfinite(value[m, k]).any():
                    best = min(best, _step(nxt, m, min(ages, k + 1), value[m, k], min(max(0, o - k * g), g), price,
                                           (t, g, o, w, d), safe))
            best = min(best, _step(nxt, m, min(ages, 1), np.delete(by_mode, m, axis=0).min(axis=0), min(o, g), price,
                                   (t, g, o, w, d), safe))
        value = nxt
        t += 1
    return best


def _step(nxt: np.ndarray, m: int, age: int, src: np.ndarray, pay: int, price: float,
          clock: tuple[int, int, int, int, int], safe: bool) -> float:
    """One billed tick in mode `m` from the costs `src` (by work done): the states it leads to go
    into `nxt`; returns the cheapest total of the runs it finishes by the deadline (inf: none)."""
    t, g, o, w, d = clock
    done = np.arange(w)
    gain = g - pay
    ends = done + gain >= w
    best = math.inf
    fin = done[ends & np.isfinite(src)]
    if fin.size:
        ok = t * g + pay + (w - fin) <= d
        if ok.any():
            best = float(src[fin][ok].min() + price)
    after = done[~ends] + gain
    # On-demand, or spot ridden without a fall, must still finish; with `safe`, off on-demand, a
    # fresh on-demand launch at the next tick must.
    left = o if safe and m != 1 else max(0, o - age * g)
    ok = (t + 1) * g + left + (w - after) <= d
    np.minimum.at(nxt[m, age], after, np.where(ok, src[~ends] + price, np.inf))
    return best


def vanish_minimax(trace: Trace, job: Job, start: int, zones: tuple[str, ...], opt_usd: float) -> float:
    """The spot-vanishes minimax ρ (module docstring), to 0.01 by bisection."""
    ticks = math.ceil(job.deadline_s / trace.gap_s)
    every = 1 if job.work_s <= 12 * 3600 else max(1, round(VANISH_EVERY_H * 3600 / trace.gap_s))
    rows = [trace.zone_index(z) for z in zones]
    vanish = {}
    for j in range(1, ticks, every):
        available = trace.available.copy()
        available[rows, start + j:] = False
        vanish[j] = hindsight_usd(replace(trace, available=available), job, start, zones, False)
    lo, hi = 1.0, 2.0
    while hindsight_usd(trace, job, start, zones, True, vanish, hi) > hi * opt_usd + 1e-9:
        lo, hi = hi, 2 * hi
    while hi - lo > 0.01:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if hindsight_usd(trace, job, start, zones, True, vanish, mid) <= mid * opt_usd + 1e-9 \
            else (mid, hi)
    return hi


@functools.cache
def _trace(name: str) -> Trace:
    return load_trace(name)


def _window(name: str, family: str, base: Job, zones: tuple[str, ...], start: int) -> tuple:
    trace = _trace(name)
    opt = simulate("optimum", trace, base, start, zones).cost_usd
    mine = hindsight_usd(trace, base, start, zones, False)
    if abs(mine - opt) > 1e-6 * max(1.0, opt):
        raise AssertionError(f"the program's optimum {mine} differs from the simulator's {opt}: {name} {start}")
    safe = hindsight_usd(trace, base, start, zones, True)
    policy = simulate(DEFAULT_POLICY, trace, base, start, zones).cost_usd
    if policy < safe - 1e-6:
        raise AssertionError(f"{DEFAULT_POLICY} {policy} below the deadline-safe bound {safe}: {name} {start}")
    return name, family, base, zones, start, opt, safe, policy


def windows(traces: list[str], grid: bool, workers: int) -> list[tuple]:
    tasks = []
    for name in traces:
        trace = _trace(name)
        families = [("demo", DEMO_JOBS, DEMO_STARTS, False)]
        if grid:
            families.append(("48 h grid", [(48.0, r) for r in GRID_RATIOS], GRID_STARTS, True))
        for family, jobs, starts, multi in families:
            scopes = [(z,) for z in trace.zones] + ([trace.zones] if multi and len(trace.zones) > 1 else [])
            for work_h, ratio in jobs:
                base = Job.from_hours(work_h, work_h * ratio, 0.2)
                tasks += [(name, family, base, zones, s) for zones in scopes for s in start_ticks(trace, base, starts)]
    if workers <= 1:
        return [_window(*task) for task in tasks]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.starmap(_window, tasks, chunksize=1)


def _name(w: tuple) -> str:
    _, _, base, zones, start, *_ = w
    return (f"{base.work_s / 3600:g} h at {base.deadline_s / base.work_s:.3g} × in {'+'.join(zones)} "
            f"from tick {start}")


def rows(found: list[tuple], workers: int) -> list[str]:
    lines = [f"| trace | windows | `{DEFAULT_POLICY}` worst × opt | its window | deadline-safe bound there "
             f"| spot-vanishes minimax there | largest deadline-safe bound | its window "
             f"| windows with the bound > {TARGET:g} |",
             "|---|---|---:|---|---:|---:|---:|---|---:|"]
    for name, family in sorted({(w[0], w[1]) for w in found}):
        mine = [w for w in found if (w[0], w[1]) == (name, family)]
        worst = sorted(mine, key=lambda w: w[7] / w[5], reverse=True)[:MINIMAX_WORST]
        args = [(_trace(name), w[2], w[4], w[3], w[5]) for w in worst]
        if workers <= 1:
            bounds = [vanish_minimax(*a) for a in args]
        else:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                bounds = pool.starmap(vanish_minimax, args, chunksize=1)
        top = max(mine, key=lambda w: w[6] / w[5])
        over = sum(w[6] / w[5] > TARGET for w in mine)
        for i, (w, b) in enumerate(zip(worst, bounds, strict=True)):
            head = (f"| {name} ({family}) | {len(mine)} " if i == 0 else "| | ")
            tail = (f"| {top[6] / top[5]:.2f} | {_name(top)} | {over} |" if i == 0 else "| | | |")
            lines.append(f"{head}| {w[7] / w[5]:.2f} | {_name(w)} | {w[6] / w[5]:.2f} | {b:.2f} {tail}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=["in", "out", "all"], default="all")
    parser.add_argument("--grid", action="store_true", help="the 48 h grid too (hours on a shared 2-core machine)")
    parser.add_argument("--no-write", action="store_true", help="print, do not update the docs")
    parser.add_argument("--workers", type=int, default=1, help="processes (figures unchanged)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    sets = {"in": [("In sample", IN_SAMPLE)], "out": [("Out of sample", OUT_OF_SAMPLE)],
            "all": [("Out of sample", OUT_OF_SAMPLE), ("In sample", IN_SAMPLE)]}[args.set]
    body = []
    for title, traces in sets:
        found = windows(traces, grid=args.grid, workers=args.workers)
        body += [f"### {title}: {', '.join(traces)}", "", *price_ratios(traces), "", *rows(found, args.workers), ""]
    section = "\n".join([
        HEADING, "",
        *"\n\n".join(__doc__.split("\n\n")[1:4]).splitlines(), "",
        *NOTE, "",
        *body,
        f"Machine: {machine()}, no GPU; load average {os.getloadavg()[0]:.1f} at the end (shared); "
        f"{time.perf_counter() - t0:.0f} s on {args.workers} worker process(es). Reproduce: "
        f"`.venv/bin/python bench/bench_worst_window.py --workers {args.workers}`.", "",
    ])
    print(section)
    if args.set == "all" and not args.no_write:
        write_section(HEADING, section)


NOTE = [  # from the figures of the last full run
    "What it says for issue 36's target (the worst window at most 1.5 × the optimum). Out of sample, on",
    "August's demo-sized windows, no online policy that guarantees the deadline can meet it: on the",
    "16-node trace a 2 h job at 1.5 × in us-west-2c from the trace's first tick (spot down for 3 ticks,",
    'up for 19, down for 2, up for 12) costs at least 1.58 × the optimum, and on the 4-node trace a 2 h',
    'job at 1.5 × in us-west-2c from tick 2902 (spot down for the first 8 ticks, 40 min of a 3 h',
    'deadline) at least 1.76, and a 4 h job at 1.2 × in us-east-1f from tick 2885 at least 1.53: once',
    'spot returns, a spot launch leaves no room for an on-demand fallback, so a run that keeps the',
    'deadline whatever comes next pays on-demand for part of the work, which the optimum, knowing spot',
    'stays, does not. In sample, no February demo-sized window has a bound above 1.28, so there this',
    'argument does not rule the target out.',
    '',
    "The default policy's worst windows are mostly not forced. Its worst August window (4.22, 4 h at 1.2",
    '× in us-west-2a from tick 2551) is bounded at 1.41: preempted after 8 ticks of spot, it went on',
    'on-demand; spot came back 4 ticks later, too late for a spot launch with a fallback (two start-ups',
    'no longer fitted), and it then stayed on on-demand for 32 ticks while spot lasted, because the',
    "zone's past (up 19% of the time, median up run 4 ticks) said spot would not. February's worst (2.21",
    'and 1.85) are bounded at 1.10 and 1.16. On the 48 h grid (a one-off run of the same programs on the',
    "default policy's two worst windows per August trace; `--grid` computes every window, which this run",
    "did not): the zones' union at 1.08 and 1.05 × from the 16-node trace's first tick (2.10 and 1.84 ×",
    'the optimum) are bounded at 1.01 and 1.13 (minimax 1.03, 1.16); on the 4-node trace the union at',
    '1.08 × from tick 3040 (2.15) and us-west-2c at 1.05 × from the first tick (2.14) at 1.02 and 1.02',
    "(minimax 1.02, 1.06). There the gap is the policy's risk model, not what can be known.",
    '',
    'Against a promise: √K (1.75 February, 2.38 August) is the best worst case over all traces that any',
    'online policy, randomized or not, can guarantee (ROSS, arXiv 2601.14612, in its model; deterministic policies',
    'Ω(K)), above 1.5 on every trace here. So the criterion can be measured on given windows, not',
    "promised, and on August's demo-sized windows it is out of reach. Best worst window reached by the",
    'default policy (bench_floor.py): February 2.21 demo-sized and 1.56 on the 48 h grid (in sample);',
    'August 4.22 and 3.36 demo-sized, 2.10 and 2.15 on the grid (out of sample).',
]

if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
