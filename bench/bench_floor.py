"""Benchmark the default policy's floor, `market.max_overpay` (issue 36): what it costs in expected
savings, and how often a job pays more than all-on-demand, in sample and out of sample.

The default policy `mdp` runs at several settings of `max_overpay` (`off`: no floor, the policy as
it was before issue 36) on two families of windows:

- demo-sized jobs: 2-6 h of work at deadlines of 1.2-1.5 × the work (`DEMO_JOBS`), 0.2 h restart
  overhead, `DEMO_STARTS` start ticks evenly spaced in every zone;
- the 48 h grid of bench_policies.py at its five deadline ratios, `GRID_STARTS` start ticks in
  every zone and over each trace's zones together, at `off` and the default only (a 48 h window
  takes about a second per policy on this machine).

The default, 0.05, was chosen on the February trace (in sample: below it the demo-sized jobs
lose much of their saving); the August traces shaped nothing in the floor (out of sample). Per
family and setting: mean and worst cost ÷ the hindsight optimum, the share of windows that cost
more than 1.02 × all-on-demand (over all windows, and on the worst trace), the worst cost ÷
all-on-demand, the mean saving against all-on-demand, and deadlines missed. Writes the section
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
SETTINGS = [math.inf, 0.1, 0.05, 0.03, 0.02, 0.0]
GRID_SETTINGS = [math.inf, DEFAULT_MAX_OVERPAY]
ABOVE = 1.02  # a window "costs more than on-demand" above this × all-on-demand (issue 36)
TARGETS_NOTE = [
    "Against issue 36's targets at the default 0.05 (figures below): the share of windows above",
    "1.02 × on-demand is 3.2% on February's demo-sized jobs (7 of 216, 14 without the floor) and",
    '4.2% on the worse August trace (3.5% over both): the 3% aimed at is not met; on the 48 h grid',
    'it is 2.0% and 0% (met). No window costs more than 1.05 × on-demand (1.048 and 1.046; without',
    'the floor 1.102 and 1.094). The mean over the 48 h grid is unchanged (1.065 and 1.112: met).',
    'The worst window is above 1.5 × the optimum on every set with or without the floor (not met),',
    'and on demo-sized jobs the floor makes it worse (1.85 → 2.06 on February, 4.22 → 7.76 on',
    'August: a 2 h job that started on on-demand, spot down, and was kept there while spot then',
    'ran cheaply: the way back to spot risks a second on-demand start-up, more than its allowance).',
    'Its price on demo-sized',
    'jobs: 0.007 × the optimum on February, 0.138 on August (saving 42.2% → 39.3%).',
]


def label(setting: float) -> str:
    return "off" if math.isinf(setting) else f"{setting:g}"


def windows(traces: list[str], jobs: list[tuple[float, float]], starts: int, multi: bool, settings: list[float]):
    """Per window: (trace, optimum $, on-demand $, {setting: ($, met deadline)})."""
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
                    for s in settings:
                        job = Job(base.work_s, base.deadline_s, base.overhead_s, s)
                        run = simulate(DEFAULT_POLICY, trace, job, start, zones)
                        runs[s] = (run.cost_usd, run.met_deadline)
                    out.append((name, best, od, runs))
    return out


def rows(found: list, settings: list[float]) -> list[str]:
    lines = ["| max_overpay | windows | mean × opt | worst × opt | > 1.02 × on-demand (worst trace) "
             "| worst × on-demand | mean saving vs on-demand | misses |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    traces = sorted({w[0] for w in found})
    for s in settings:
        ratio = [w[3][s][0] / w[1] for w in found if w[1] > 0]
        above = [w[3][s][0] > ABOVE * w[2] for w in found]
        per_trace = [np.mean([w[3][s][0] > ABOVE * w[2] for w in found if w[0] == t]) for t in traces]
        to_od = [w[3][s][0] / w[2] for w in found]
        saving = [1 - r for r in to_od]
        misses = sum(not w[3][s][1] for w in found)
        lines.append(f"| {label(s)} | {len(found)} | {np.mean(ratio):.3f} | {max(ratio):.2f} | "
                     f"{100 * np.mean(above):.1f}% ({100 * max(per_trace):.1f}%) | {max(to_od):.3f} | "
                     f"{100 * np.mean(saving):.1f}% | {misses} |")
    return lines


def report(traces: list[str], demo_only: bool) -> list[str]:
    demo = windows(traces, DEMO_JOBS, DEMO_STARTS, False, SETTINGS)
    out = [f"Demo-sized jobs ({', '.join(f'{w:g} h / {r:.3g}' for w, r in DEMO_JOBS)}; "
           f"{DEMO_STARTS} starts per zone):", "", *rows(demo, SETTINGS), ""]
    if not demo_only:
        grid = windows(traces, [(48.0, r) for r in GRID_RATIOS], GRID_STARTS, True, GRID_SETTINGS)
        out += [f"48 h grid (deadline / work {', '.join(f'{r:.3g}' for r in GRID_RATIOS)}; {GRID_STARTS} starts "
                "per zone and over each trace's zones together):", "", *rows(grid, GRID_SETTINGS), ""]
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
