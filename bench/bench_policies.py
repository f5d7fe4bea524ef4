"""Benchmark the spot policies against the optimum on the shared AWS V100 trace (issue 5).

Runs every policy on the standard benchmark (48 h of work, 52 h deadline, 0.2 h restart
overhead, 9 zones × 6 starts, plus all zones together), sweeps the deadline slack, times the
simulator and the planner, and writes the section `## Spot policies (issue 5)` of
docs/benchmarks.md (other sections are left as they are).

    .venv/bin/python bench/bench_policies.py            # full run, rewrites the section
    .venv/bin/python bench/bench_policies.py --no-write  # print only
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np

from spotfit.market.offers import plan
from spotfit.market.policies.base import POLICIES
from spotfit.market.simulator import Job, run_grid, summarize
from spotfit.market.trace import load_trace

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADING = "## Spot policies (issue 5)"
ONLINE = [p for p in POLICIES if p != "optimum"]
ORDER = ["optimum", "spotfit", "uniform_progress", "greedy", "on_demand"]
SLACKS = [1.05, 1.1, 1.25, 1.5, 2.0]


def standard(trace) -> tuple[list[str], dict]:
    job = Job.from_hours(48, 52, 0.2)
    timings = {}
    t0 = time.perf_counter()
    runs = run_grid(trace, job, ["optimum"], 6)
    timings["optimum, 60 runs (54 single-zone + 6 multi-zone)"] = time.perf_counter() - t0
    for name in ONLINE:
        t0 = time.perf_counter()
        single = run_grid(trace, job, [name], 6)
        timings[f"{name}, 54 single-zone runs"] = time.perf_counter() - t0
        runs += single
    summary = sorted(summarize(runs), key=lambda s: (s["scope"] != "zone", ORDER.index(s["policy"])))
    lines = ["| policy | scope | runs | mean $ | mean × optimum | worst × optimum | misses | launches |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for s in summary:
        lines.append(f"| {s['policy']} | {s['scope']} | {s['runs']} | {s['mean_cost_usd']:.2f} | "
                     f"{s['mean_ratio_to_optimum']:.3f} | {s['worst_ratio_to_optimum']:.3f} | "
                     f"{s['misses']} | {s['mean_launches']:.1f} |")
    return lines, timings


def sweep(trace) -> list[str]:
    header = "| deadline / work | " + " | ".join(f"{p} mean (worst) × opt, misses" for p in ORDER[1:]) + " |"
    lines = [header, "|---|" + "---:|" * (len(ORDER) - 1)]
    for slack in SLACKS:
        job = Job.from_hours(48, 48 * slack, 0.2)
        runs = run_grid(trace, job, ORDER, 3)
        runs = [r for r in runs if r.zone != "*"]
        rows = {s["policy"]: s for s in summarize(runs)}
        cells = [f"{rows[p]['mean_ratio_to_optimum']:.3f} ({rows[p]['worst_ratio_to_optimum']:.2f}), "
                 f"{rows[p]['misses']}" for p in ORDER[1:]]
        lines.append(f"| {slack:g} | " + " | ".join(cells) + " |")
    return lines


def timing(trace) -> dict:
    job = Job.from_hours(48, 52, 0.2)
    out = {}
    t0 = time.perf_counter()
    run_grid(trace, job, ["spotfit"], 6)
    out["spotfit, 54 single-zone + 6 multi-zone runs"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan("V100", count=1, work_h=48, deadline_h=52)
    out["plan V100 × 1, 48 h / 52 h (trace load + 40 simulations)"] = time.perf_counter() - t0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print, do not update the docs")
    args = parser.parse_args()
    t0 = time.perf_counter()
    trace = load_trace("aws-v100")
    load_s = time.perf_counter() - t0
    table, timings = standard(trace)
    timings = {"load the trace (20,158 ticks × 9 zones)": load_s, **timings, **timing(trace)}
    sweep_table = sweep(trace)
    section = "\n".join([
        HEADING,
        "",
        "Shared AWS p3.2xlarge (1×V100) trace, 195 s ticks; 48 h of work, 52 h deadline, 0.2 h",
        "restart overhead; 6 start ticks evenly spaced over the trace in each of the 9 zones",
        "(scope `zone`, 54 runs) and over all 9 zones together (scope `multi`, 6 runs). Ratios are",
        "per run to the optimum of the same scope (the exact backward DP), then averaged.",
        "Reproduce: `.venv/bin/python bench/bench_policies.py`.",
        "",
        *table,
        "",
        "Deadline slack sweep (single-zone, 9 zones × 3 starts, 48 h of work):",
        "",
        *sweep_table,
        "",
        "Timings on this machine (2 CPU cores):",
        "",
        "| what | seconds |",
        "|---|---:|",
        *[f"| {k} | {v:.2f} |" for k, v in timings.items()],
        "",
    ])
    print(section)
    if not args.no_write:
        write_section(section)


def write_section(section: str) -> None:
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n\n"
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
