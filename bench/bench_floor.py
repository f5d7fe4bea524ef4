"""Benchmark the default policy's floor, `market.max_overpay` (issue 36): what it costs in expected
savings, and how often a job pays more than all-on-demand, in sample and out of sample.

The default policy `mdp` runs side by side, in one run: `off` (no floor, the policy before
issue 36), `before` (the hard bound alone at `max_overpay` 0.05, the default of commit df6d9a2)
and `default` (the hard bound at the default `max_overpay` with the chance bound of
spotfit/market/policies/floor.py), on two families of windows:

- demo-sized jobs: 2-6 h of work at deadlines of 1.2-1.5 × the work (`DEMO_JOBS`), 0.2 h restart
  overhead, `DEMO_STARTS` start ticks evenly spaced in every zone; also the knob, `max_overpay`
  from 0.2 to 0, with the chance bound;
- the 48 h grid of bench_policies.py at its five deadline ratios, `GRID_STARTS` start ticks in
  every zone and over each trace's zones together (a 48 h window takes about a second per
  policy on this machine).

The chance bound's `MAX_LOSS_CHANCE` (0.3) and the default `max_overpay` (0.1) were chosen on the
February trace (in sample); the August traces shaped nothing in the floor (out of sample). Per
trace, family and floor: mean and worst cost ÷ the hindsight optimum, the share (and number) of
windows that cost more than 1.02 × all-on-demand, the worst cost ÷ all-on-demand, the mean
saving against all-on-demand, and deadlines missed. Writes the section
`## The default policy's floor (issue 36)` of docs/benchmarks.md.

    .venv/bin/python bench/bench_floor.py              # full run, rewrites the section
    .venv/bin/python bench/bench_floor.py --no-write   # print only
    .venv/bin/python bench/bench_floor.py --set in --demo-only   # iterate on February, fast
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
from _doc import machine, write_section

import spotfit.market.policies.floor as floor
from spotfit.market.policies.base import DEFAULT_MAX_OVERPAY, DEFAULT_POLICY
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import load_trace

HEADING = "## The default policy's floor (issue 36)"
IN_SAMPLE = ["aws-v100"]
OUT_OF_SAMPLE = ["aws-v100-aug-16node", "aws-v100-aug-4node"]
DEMO_JOBS = [(2.0, 1.5), (3.0, 4 / 3), (4.0, 1.2), (6.0, 1.25)]  # (work h, deadline / work)
DEMO_STARTS = 6
GRID_RATIOS = [52 / 48, 1.05, 1.25, 1.5, 2.0]
GRID_STARTS = 3
ABOVE = 1.02  # a window "costs more than on-demand" above this × all-on-demand (issue 36)
# (label, max_overpay, the chance bound's MAX_LOSS_CHANCE; 1 turns it off)
OFF = ("off", math.inf, 1.0)  # no floor: the policy before issue 36
BEFORE = ("before", 0.05, 1.0)  # the hard bound alone at 0.05: the default of commit df6d9a2
AFTER = ("default", DEFAULT_MAX_OVERPAY, floor.MAX_LOSS_CHANCE)
SIDE_BY_SIDE = [OFF, BEFORE, AFTER]
KNOB = [(f"{m:g}", m, floor.MAX_LOSS_CHANCE) for m in (0.2, 0.1, 0.05, 0.02, 0.0)]
TARGETS_NOTE = [  # from the figures of the last full run
    "Against issue 36's targets at the default (figures below, measured side by side with `off` and",
    '`before` in one run). Share of windows above 1.02 × on-demand, at most 3% per trace: met on',
    'August (demo-sized 1.4% and 2.8%, was 4.2% and 2.8% before, 8.3% and 2.8% off; 48 h grid 0%)',
    "and on February's 48 h grid (2.0%); not met on February's demo-sized jobs, 3.2% (7 of 216, as",
    'before; 14 off): one window over. Mean × optimum, at most 0.01 above `off`: met on February',
    "(demo +0.009, grid +0.003), on August's 4-node trace (+0.009) and both August grids (+0.001);",
    "not met on August's 16-node demo-sized jobs, 1.204 against 1.183 (+0.021, over by 0.011; before",
    'it was 1.282). Worst window at most 1.5 × the optimum: not met anywhere, with or without a floor',
    '(demo-sized 2.21, 4.22, 3.36; 48 h grid 1.56, 1.88, 2.15): a short job that falls back to',
    'on-demand while spot then runs cheaply all window pays several times an optimum that knew it',
    "would. The remaining February windows above on-demand are launches the zone's past gave a",
    "small chance of loss (about 0.08) that were lost, and windows at the trace's first tick, where",
    "the zone has no history and the chance is the prior's alone.",
]


def windows(traces: list[str], jobs: list[tuple[float, float]], starts: int, multi: bool, variants: list[tuple]):
    """Per window: (trace, optimum $, on-demand $, {label: ($, met deadline)})."""
    out = []
    for name in traces:
        trace = load_trace(name)
        scopes = [(z,) for z in trace.zones] + ([trace.zones] if multi and len(trace.zones) > 1 else [])
        for work_h, ratio in jobs:
            base = Job.from_hours(work_h, work_h * ratio, 0.2)
            for zones in scopes:
                for start in start_ticks(trace, base, starts):
                    best = simulate("optimum", trace, base, start, zones).cost_usd
                    od = simulate("on_demand", trace, base, start, zones).cost_usd
                    runs = {}
                    for label, bound, chance in variants:
                        runs[label] = _run(trace, Job(base.work_s, base.deadline_s, base.overhead_s, bound),
                                           start, zones, chance)
                    out.append((name, best, od, runs))
    return out


def _run(trace, job: Job, start: int, zones: tuple, chance: float) -> tuple[float, bool]:
    kept = floor.MAX_LOSS_CHANCE
    floor.MAX_LOSS_CHANCE = chance
    try:
        run = simulate(DEFAULT_POLICY, trace, job, start, zones)
    finally:
        floor.MAX_LOSS_CHANCE = kept
    return run.cost_usd, run.met_deadline


def rows(found: list, variants: list[tuple]) -> list[str]:
    lines = ["| trace | floor | windows | mean × opt | worst × opt | > 1.02 × on-demand "
             "| worst × on-demand | mean saving vs on-demand | misses |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in sorted({w[0] for w in found}):
        mine = [w for w in found if w[0] == t]
        for label, _, _ in variants:
            cost = np.array([w[3][label][0] for w in mine])
            best = np.array([w[1] for w in mine])
            od = np.array([w[2] for w in mine])
            ratio = cost[best > 0] / best[best > 0]
            above = cost > ABOVE * od
            misses = sum(not w[3][label][1] for w in mine)
            lines.append(f"| {t} | {label} | {len(mine)} | {ratio.mean():.3f} | {ratio.max():.2f} | "
                         f"{100 * above.mean():.1f}% ({int(above.sum())}) | {(cost / od).max():.3f} | "
                         f"{100 * (1 - cost / od).mean():.1f}% | {misses} |")
    return lines


def report(traces: list[str], demo_only: bool) -> list[str]:
    demo = windows(traces, DEMO_JOBS, DEMO_STARTS, False, SIDE_BY_SIDE + KNOB)
    out = [f"Demo-sized jobs ({', '.join(f'{w:g} h / {r:.3g}' for w, r in DEMO_JOBS)}; "
           f"{DEMO_STARTS} starts per zone):", "", *rows(demo, SIDE_BY_SIDE), "",
           "The knob (`max_overpay`, with the chance bound) on the same windows:", "", *rows(demo, KNOB), ""]
    if not demo_only:
        grid = windows(traces, [(48.0, r) for r in GRID_RATIOS], GRID_STARTS, True, SIDE_BY_SIDE)
        out += [f"48 h grid (deadline / work {', '.join(f'{r:.3g}' for r in GRID_RATIOS)}; {GRID_STARTS} starts "
                "per zone and over each trace's zones together):", "", *rows(grid, SIDE_BY_SIDE), ""]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=["in", "out", "all"], default="all",
                        help="in: February (the choice), out: August (the report); all: both, the only "
                             "choice that rewrites the docs")
    parser.add_argument("--demo-only", action="store_true", help="skip the 48 h grid; never writes the docs")
    parser.add_argument("--no-write", action="store_true", help="print, do not update the docs")
    args = parser.parse_args()
    t0 = time.perf_counter()
    sets = {"in": [("In sample", IN_SAMPLE)], "out": [("Out of sample", OUT_OF_SAMPLE)],
            "all": [("Out of sample", OUT_OF_SAMPLE), ("In sample", IN_SAMPLE)]}[args.set]
    body = []
    for title, traces in sets:
        body += [f"### {title}: {', '.join(traces)}", "", *report(traces, args.demo_only)]
    section = "\n".join([
        HEADING,
        "",
        *"\n\n".join(__doc__.split("\n\n")[1:4]).splitlines(),
        "",
        *TARGETS_NOTE,
        "",
        *body,
        f"Machine: {machine()}, no GPU; load average {os.getloadavg()[0]:.1f} at the end (shared); "
        f"{time.perf_counter() - t0:.0f} s. Reproduce: `.venv/bin/python bench/bench_floor.py`.",
        "",
    ])
    print(section)
    if args.set == "all" and not args.demo_only and not args.no_write:
        write_section(HEADING, section)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
