"""Benchmark the default policy's floor, `market.max_overpay` (issue 36): what it costs in expected
savings, and how often a job pays more than all-on-demand, in sample and out of sample.

The default policy `mdp` runs side by side, in one run: `off` (no floor: the policy before
issue 36), `previous` (the floor of commit ce9b523: the hard bound at `max_overpay` 0.1 and the
chance bound, whose chance is the prior's wherever the zone has no evidence) and `default` (the
same, where a switch off on-demand without evidence reads the scale-free chance: all in
spotfit/market/policies/floor.py), on two families of windows. All three run the same `mdp`,
which waits idle for a run the chance bound holds back only while a launch would still fit (a
no-op without a floor).

- demo-sized jobs: 2-6 h of work at deadlines of 1.2-1.5 × the work (`DEMO_JOBS`), 0.2 h restart
  overhead, `DEMO_STARTS` start ticks evenly spaced in every zone; also the knob, `max_overpay`
  from 0.2 to 0, with the chance bound;
- the 48 h grid of bench_policies.py at its five deadline ratios, `GRID_STARTS` start ticks in
  every zone and over each trace's zones together (a 48 h window takes about a second per
  policy on this machine).

The chance bound's `MAX_LOSS_CHANCE` (0.3), the default `max_overpay` (0.1) and the switch's
evidence rule were chosen on the February trace (in sample), and the wait for a run to prove
itself (no constant) was found and checked there; the August traces shaped nothing in the floor
(out of sample). Per trace, the price ratio K = on-demand ÷ median spot price and its
square root, the lower bound on the worst window ÷ the optimum that no online policy (randomized
or not) can beat in the worst case (ROSS, arXiv 2601.14612: deterministic policies Ω(K)). Per
trace, family and floor: mean and worst cost ÷ the hindsight optimum, the share (and number) of
windows that cost more than 1.02 × all-on-demand, the worst cost ÷ all-on-demand, the mean
saving against all-on-demand, and deadlines missed. Writes the section
`## The default policy's floor (issue 36)` of docs/benchmarks.md.

    .venv/bin/python bench/bench_floor.py              # full run, rewrites the section
    .venv/bin/python bench/bench_floor.py --no-write   # print only
    .venv/bin/python bench/bench_floor.py --set in --demo-only   # iterate on February, fast
    .venv/bin/python bench/bench_floor.py --workers 2   # the same figures, on two processes
    .venv/bin/python bench/bench_floor.py --sensitivity  # MAX_LOSS_CHANCE 0.25-0.5, demo-sized, print only
"""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing
import os
import time

import numpy as np
from _doc import machine, write_section

import spotfit.market.policies.floor as floor
from spotfit.market.policies.base import DEFAULT_MAX_OVERPAY, DEFAULT_POLICY
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import Trace, load_trace

HEADING = "## The default policy's floor (issue 36)"
IN_SAMPLE = ["aws-v100"]
OUT_OF_SAMPLE = ["aws-v100-aug-16node", "aws-v100-aug-4node"]
DEMO_JOBS = [(2.0, 1.5), (3.0, 4 / 3), (4.0, 1.2), (6.0, 1.25)]  # (work h, deadline / work)
DEMO_STARTS = 6
GRID_RATIOS = [52 / 48, 1.05, 1.25, 1.5, 2.0]
GRID_STARTS = 3
ABOVE = 1.02  # a window "costs more than on-demand" above this × all-on-demand (issue 36)
# (label, max_overpay, the chance bound's MAX_LOSS_CHANCE (1 turns it off), SWITCH_NEEDS_EVIDENCE)
OFF = ("off", math.inf, 1.0, False)  # no floor: the policy before issue 36
PREVIOUS = ("previous", 0.1, 0.3, False)  # the default of commit ce9b523
AFTER = ("default", DEFAULT_MAX_OVERPAY, floor.MAX_LOSS_CHANCE, floor.SWITCH_NEEDS_EVIDENCE)
SIDE_BY_SIDE = [OFF, PREVIOUS, AFTER]
KNOB = [(f"{m:g}", m, floor.MAX_LOSS_CHANCE, floor.SWITCH_NEEDS_EVIDENCE) for m in (0.2, 0.1, 0.05, 0.02, 0.0)]
# `--sensitivity`: the chance bound's MAX_LOSS_CHANCE around its value, the rest at the default
CHANCES = [(f"chance {c:g}", DEFAULT_MAX_OVERPAY, c, floor.SWITCH_NEEDS_EVIDENCE) for c in (0.25, 0.3, 0.35, 0.4, 0.5)]
TARGETS_NOTE = [  # from the figures of the last full run
    "Against issue 36's targets at the default (figures below; `off`, `previous` and `default` in one",
    "run, with the wait for a run to prove itself, next paragraph). Share of windows above 1.02 × on-",
    "demand, at most 3% per trace: met on every set (in sample, February demo-sized 2.3%, grid 0.7%; out",
    "of sample, August demo-sized 1.4% and 1.4%, grids 0%). Mean × optimum, at most 0.01 above `off`: met",
    "on February (demo-sized +0.005, grid +0.002) and August 4-node (+0.009, +0.001); not on August",
    "16-node, out of sample (demo-sized 1.213 against 1.183, +0.030; grid 1.099 against 1.086, +0.013).",
    '',
    "The wait for a run to prove itself (`floor.proving_ticks`, in `mdp`; found and checked on February,",
    "in sample). February's worst demo-sized window (4 h at 1.2 × in us-east-1c from tick 12041, 2.21 ×",
    "the optimum) was the job waiting idle while spot was up and the chance bound held the launch back (a",
    "fresh run, loss chance 0.53 against 0.3), for 7 ticks, until the slack no longer fitted a launch; it",
    "then ran on on-demand throughout while spot stayed up. `mdp`'s program never waits while spot is up,",
    "but its value of waiting one tick assumed the launch it waits for would be allowed. Now the job",
    "waits only while, should the run last, the bound would let the launch go in time for its start-up",
    "and the on-demand fallback; else it takes on-demand at once and leaves it later under the same",
    "bound. That window: 1.84. In this run: February's demo-sized default 1.083 · 1.85 · 2.3% (mean × opt",
    "· worst × opt · share above 1.02 × on-demand; in sample), before 1.085 · 2.21 · 2.3%, and `previous`",
    "1.086 · 1.85 · 3.2% (before 1.087 · 2.21 · 3.2%); every other row of `off`, `previous` and",
    "`default`, February's grid and August's four sets (out of sample), is the same to the last digit as",
    "before. make demo's window simulates the same decisions (cost $7.01 at 0.2 h, regret 1.099).",
    '',
    "Tried for the August 16-node grid's +0.013, and not kept: the trace's left-censored first run. The",
    "windows where `default` and `off` differ there start at the trace's first tick, but there every zone",
    "is down at that tick, so no up run is left-censored: the scale-free chance holds the switch off on-",
    "demand for runs whose start was seen while no run has ended yet (us-east-2b at 1.05 ×: the floor",
    "lets it go at age 17 ticks, and `mdp`'s own values then keep on-demand until age 78, within 0.3% of",
    "each other). What is left-censored there is the first down run (3 ticks), which `mdp` counted as a",
    "15-minute outage. Two treatments without a constant of the history's first run (its length only a",
    "lower bound), in `mdp`'s run model and the floor's chance, were measured with the wait rule: leaving",
    "it out (survival analysis leaves out a life whose ages are unknown), and counting it as censored",
    "(lasted at least what was seen: exposure without an end). Out of sample, 48 h grids, default (off in",
    "the same run): left out 16-node 1.090 (1.086), 4-node 1.157 (1.157); censored 16-node 1.096 (1.085),",
    "4-node 1.151 (1.151); the policy before both, 1.099 (1.086) and 1.139 (1.138). Each lowered the",
    "16-node mean and raised the 4-node mean by more, in `off` too (the change is in `mdp`'s model; the",
    "4-node trace's first up run, in us-east-2a, lasted 30 h, which leaving out loses and censoring",
    "weakens). August's demo-sized rows did not change. The censored reading was measured after the first",
    "one had been seen out of sample; both were reverted. The first run stays a completed run.",
    '',
    "The next two paragraphs are from the full run before the wait rule (its figures: default February",
    "1.085 and 1.067, August 16-node 1.213 and 1.099, 4-node 1.155 and 1.139, demo-sized and grid), kept",
    "as the record of what was tried:",
    '',
    "What the August misses are. The grid's +0.013 (a bootstrap over its 60 windows: +0.001 to +0.027,",
    "95%) is +0.011 from the 20 windows that start at the trace's first tick, where no run has ended yet:",
    'the evidence rule waits on on-demand for runs too young to trust (mostly three 48 h windows, +0.22',
    "each: us-east-2b at 1.05 × the work and the zones' union at 1.05 and 1.08 ×). On every set compared",
    'window by window (the demo-sized windows of all three traces and the 16-node grid), every window in',
    'which `default` and `previous` differ starts at that tick. The demo-sized +0.030 is not resolved by',
    '72 windows (17 differ from `off`; bootstrap −0.021 to +0.087): +0.009 is the same first-tick rule',
    "(seven windows, net), and +0.017 is one window (3 h at tick 2559 in us-west-2a), a run the zone's",
    "past says usually dies (median completed up run 4 ticks, 20 min) that lasted to the window's end (45",
    'ticks), so the switch off on-demand waited 10 ticks at 5.65 × the spot price.',
    '',
    'Tried against it, chosen on February and read on August (`--sensitivity` for the first): the chance',
    "bound's MAX_LOSS_CHANCE at 0.25, 0.3, 0.35, 0.4 and 0.5 gives February's demo-sized share 3.7%,",
    '2.3%, 5.1%, 5.1% and 4.6% (0.3 is the only one that meets 3% there, and the share is not monotone in',
    "it: a blocked launch moves the later ones) and August 16-node's demo-sized mean 1.226, 1.213, 1.207,",
    '1.229 and 1.206 (none within +0.01 of `off`); a rent-or-buy rule in place of the scale-free chance',
    'where the zone has no evidence (switch off on-demand once the premium paid over spot during the',
    'current run covers what a lost switch costs: deterministic ski rental, no constant) left February at',
    '2.3% and 1.086, and made August worse (16-node demo-sized 1.222; 4-node share 6.9%, 5 of 72); it was',
    'not kept. The share target and the August mean pull on the same decisions (which young runs to',
    'trust), and on these windows no setting tried met both; the held-out traces will tell whether 0.3',
    'holds.',
    '',
    "Worst window at most 1.5 × the optimum: not met (demo-sized 1.85, 4.22, 3.36; 48 h grid 1.56, 2.10,",
    "2.15). It cannot be promised: the ratio K of on-demand to spot puts the best worst case any online",
    "policy can guarantee at √K (1.75 February, 2.38 August), above 1.5 (ROSS, arXiv 2601.14612). On",
    "August's demo-sized windows it cannot be met at all by a policy that guarantees the deadline: the",
    "section \"The worst window: what an online policy can reach\" finds windows where even a policy that",
    "knew the future, but kept an on-demand fallback as a deadline guarantee needs, pays 1.58 (16-node)",
    "and 1.76 (4-node) × the optimum. February's worst demo-sized window is now 4 h at 1.2 × in us-",
    "east-1c from tick 8028 (1.85, bounded at 1.16): preempted after 35 ticks of spot, the job waited out",
    "the outage until a spot launch no longer fitted, went on on-demand, and spot came back one tick",
    "later; the outage's length is what an online policy cannot know, and no rule without a constant was",
    "found for it.",
]


def windows(traces: list[str], jobs: list[tuple[float, float]], starts: int, multi: bool, variants: list[tuple],
            workers: int = 1):
    """Per window: (trace, optimum $, on-demand $, {label: ($, met deadline)}), on `workers` processes."""
    tasks = []
    for name in traces:
        trace = _trace(name)
        scopes = [(z,) for z in trace.zones] + ([trace.zones] if multi and len(trace.zones) > 1 else [])
        for work_h, ratio in jobs:
            base = Job.from_hours(work_h, work_h * ratio, 0.2)
            tasks += [(name, base, zones, start, variants) for zones in scopes
                      for start in start_ticks(trace, base, starts)]
    if workers <= 1:
        return [_window(*task) for task in tasks]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.starmap(_window, tasks, chunksize=1)


@functools.cache
def _trace(name: str) -> Trace:
    return load_trace(name)


def _window(name: str, base: Job, zones: tuple, start: int, variants: list[tuple]):
    trace = _trace(name)
    best = simulate("optimum", trace, base, start, zones).cost_usd
    od = simulate("on_demand", trace, base, start, zones).cost_usd
    runs = {label: _run(trace, Job(base.work_s, base.deadline_s, base.overhead_s, bound), start, zones, chance,
                        evidence)
            for label, bound, chance, evidence in variants}
    return name, best, od, runs


def _run(trace, job: Job, start: int, zones: tuple, chance: float, evidence: bool) -> tuple[float, bool]:
    kept = floor.MAX_LOSS_CHANCE, floor.SWITCH_NEEDS_EVIDENCE
    floor.MAX_LOSS_CHANCE, floor.SWITCH_NEEDS_EVIDENCE = chance, evidence
    try:
        run = simulate(DEFAULT_POLICY, trace, job, start, zones)
    finally:
        floor.MAX_LOSS_CHANCE, floor.SWITCH_NEEDS_EVIDENCE = kept
    return run.cost_usd, run.met_deadline


def rows(found: list, variants: list[tuple]) -> list[str]:
    lines = ["| trace | floor | windows | mean × opt | worst × opt | > 1.02 × on-demand "
             "| worst × on-demand | mean saving vs on-demand | misses |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for t in sorted({w[0] for w in found}):
        mine = [w for w in found if w[0] == t]
        for label, *_ in variants:
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


def price_ratios(traces: list[str]) -> list[str]:
    """Per trace: K = on-demand ÷ the median spot price over its zones and ticks, and √K."""
    out = []
    for name in traces:
        trace = load_trace(name)
        k = float(np.median(trace.on_demand_usd_per_h) / np.median(trace.spot_usd_per_h))
        out.append(f"- {name}: K = {k:.2f}, √K = {math.sqrt(k):.2f}")
    return out


def report(traces: list[str], demo_only: bool, workers: int) -> list[str]:
    demo = windows(traces, DEMO_JOBS, DEMO_STARTS, False, SIDE_BY_SIDE + KNOB, workers)
    out = ["Price ratio and the bound on the worst window:", "", *price_ratios(traces), "",
           f"Demo-sized jobs ({', '.join(f'{w:g} h / {r:.3g}' for w, r in DEMO_JOBS)}; "
           f"{DEMO_STARTS} starts per zone):", "", *rows(demo, SIDE_BY_SIDE), "",
           "The knob (`max_overpay`, with the chance bound) on the same windows:", "", *rows(demo, KNOB), ""]
    if not demo_only:
        grid = windows(traces, [(48.0, r) for r in GRID_RATIOS], GRID_STARTS, True, SIDE_BY_SIDE, workers)
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
    parser.add_argument("--workers", type=int, default=1, help="processes that simulate windows (figures unchanged)")
    parser.add_argument("--sensitivity", action="store_true",
                        help="print the demo-sized table for MAX_LOSS_CHANCE around its value; never writes the docs")
    args = parser.parse_args()
    t0 = time.perf_counter()
    sets = {"in": [("In sample", IN_SAMPLE)], "out": [("Out of sample", OUT_OF_SAMPLE)],
            "all": [("Out of sample", OUT_OF_SAMPLE), ("In sample", IN_SAMPLE)]}[args.set]
    if args.sensitivity:
        for title, traces in sets:
            found = windows(traces, DEMO_JOBS, DEMO_STARTS, False, CHANCES, args.workers)
            print("\n".join([f"### {title}: {', '.join(traces)} (demo-sized jobs)", "", *rows(found, CHANCES), ""]))
        print(f"{time.perf_counter() - t0:.0f} s on {args.workers} worker process(es), load average "
              f"{os.getloadavg()[0]:.1f} (shared)")
        return
    body = []
    for title, traces in sets:
        body += [f"### {title}: {', '.join(traces)}", "", *report(traces, args.demo_only, args.workers)]
    section = "\n".join([
        HEADING,
        "",
        *"\n\n".join(__doc__.split("\n\n")[1:4]).splitlines(),
        "",
        *TARGETS_NOTE,
        "",
        *body,
        f"Machine: {machine()}, no GPU; load average {os.getloadavg()[0]:.1f} at the end (shared); "
        f"{time.perf_counter() - t0:.0f} s on {args.workers} worker process(es). Reproduce: "
        f"`.venv/bin/python bench/bench_floor.py --workers {args.workers}`.",
        "",
    ])
    print(section)
    if args.set == "all" and not args.demo_only and not args.no_write:
        write_section(HEADING, section)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
