"""Benchmark the spot policies against the optimum, in sample and out of sample (issue 12).

The default policy's constants were chosen on the bundled February 2023 trace (`aws-v100`,
9 zones): that is the in-sample set. The August 2023 availability-count traces
(`aws-v100-aug-16node`, `aws-v100-aug-4node`: 6 zone datasets, catalog prices) shaped nothing
in the policy: that is the out-of-sample set, and its figures are the result.

For each set and each deadline / work ratio: 48 h of work, 0.2 h restart overhead, 6 start
ticks evenly spaced in every zone (scope `zone`) and over each trace's zones together (scope
`multi`); ratios are per run to the optimum of the same scope, then averaged. Writes the
section `## Spot policies (issue 5)` of docs/benchmarks.md (other sections are left alone).

    .venv/bin/python bench/bench_policies.py            # full run, rewrites the section
    .venv/bin/python bench/bench_policies.py --no-write  # print only
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time
from pathlib import Path

import numpy as np

from spotfit.market.policies.base import make_policy
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import load_trace

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADING = "## Spot policies (issue 5)"
IN_SAMPLE = ["aws-v100"]
OUT_OF_SAMPLE = ["aws-v100-aug-16node", "aws-v100-aug-4node"]
POLICIES = ["spotfit", "uniform_progress", "greedy", "on_demand"]
RATIOS = [52 / 48, 1.05, 1.25, 1.5, 2.0]


def runs_of(traces: list[str], ratio: float) -> list[tuple[str, str, float, bool]]:
    """(trace, policy, cost ÷ optimum, met deadline) for every run of one deadline ratio."""
    job = Job.from_hours(48, 48 * ratio, 0.2)
    out = []
    for name in traces:
        trace = load_trace(name)
        scopes = [(z,) for z in trace.zones] + [trace.zones]
        for zones in scopes:
            for start in start_ticks(trace, job, 6):
                best = simulate("optimum", trace, job, start, zones).cost_usd
                for policy in POLICIES:
                    if len(zones) > 1 and not make_policy(policy).multi_zone:
                        continue
                    run = simulate(policy, trace, job, start, zones)
                    scope = "multi" if len(zones) > 1 else "zone"
                    out.append((name, f"{policy}/{scope}", run.cost_usd / best, run.met_deadline))
    return out


def table(traces: list[str]) -> list[str]:
    cols = [f"{p}/zone" for p in POLICIES] + ["spotfit/multi"]
    lines = ["| deadline / work | " + " | ".join(f"{c} mean (worst) × opt, misses" for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    per_trace: dict[str, dict[str, list[float]]] = {}
    for ratio in RATIOS:
        runs = runs_of(traces, ratio)
        cells = []
        for col in cols:
            rs = [r for r in runs if r[1] == col]
            ratios = [r[2] for r in rs]
            cells.append(f"{np.mean(ratios):.3f} ({max(ratios):.2f}), {sum(not r[3] for r in rs)}")
        lines.append(f"| {ratio:.3g} | " + " | ".join(cells) + " |")
        for name in traces:
            for col in ("spotfit/zone", "uniform_progress/zone"):
                vals = [r[2] for r in runs if r[0] == name and r[1] == col]
                per_trace.setdefault(f"{name} @ {ratio:.3g}", {}).setdefault(col, []).extend(vals)
    lines += ["", "Per trace and ratio, single-zone mean × optimum (spotfit vs uniform_progress):", ""]
    lines += [f"- {key}: {np.mean(v['spotfit/zone']):.3f} vs {np.mean(v['uniform_progress/zone']):.3f}"
              for key, v in per_trace.items()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print, do not update the docs")
    args = parser.parse_args()
    t0 = time.perf_counter()
    oos = table(OUT_OF_SAMPLE)
    ins = table(IN_SAMPLE)
    section = "\n".join([
        HEADING,
        "",
        "1×V100 (AWS p3.2xlarge); 48 h of work, 0.2 h restart overhead, deadline = ratio × work;",
        "6 start ticks evenly spaced over each trace in every zone (`zone`) and over each trace's",
        "zones together (`multi`). Ratios are per run to the optimum of the same scope (the exact",
        "backward DP), then averaged; worst in brackets; misses = deadlines missed.",
        "Reproduce: `.venv/bin/python bench/bench_policies.py`.",
        "",
        "### Out of sample (the result)",
        "",
        "August 2023 availability counts, 300 s ticks, `aws-v100-aug-16node` + `aws-v100-aug-4node`",
        "(6 zone datasets, catalog prices: docs/market.md). Nothing in the policy was tuned on them.",
        "",
        *oos,
        "",
        "### In sample",
        "",
        "February 2023 trace `aws-v100` (9 zones, 195 s ticks, real spot prices): the default",
        "policy's constants were chosen on it, so these figures guard against regressions and",
        "say nothing about other markets. Structural changes are chosen here too: bounding the",
        "outages to come by the spot time still needed was kept (single-zone 1.117 → 1.116 at",
        "52 / 48); the outage threshold over the zones' union for multi-zone was not (1.047 →",
        "1.142 at 52 / 48, 1.080 → 1.164 at 1.05).",
        "",
        *ins,
        "",
        "Anchors: on the in-sample benchmark (52 / 48) `uniform_progress` averages 1.211 × the",
        "optimum, the figure of the published Can't Be Late simulator. The ADRS policy evolved",
        "with OpenEvolve is reported 7% below Uniform Progress in one region (on the paper's traces,",
        "20-minute cold starts); ROSS (randomized, optimal competitive ratio) is not implemented",
        "here, so neither is compared run for run.",
        "",
        f"Machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPU cores; whole benchmark {time.perf_counter() - t0:.0f} s.",
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
