"""Benchmark the spot policies against the optimum, in sample and out of sample (issue 12).

The policies' constants and designs were chosen on the bundled February 2023 trace
(`aws-v100`, 9 zones): that is the in-sample set. The August 2023 availability-count traces
(`aws-v100-aug-16node`, `aws-v100-aug-4node`: 6 zone datasets, catalog prices) shaped nothing
in the policy: that is the out-of-sample set, and its figures are the result.

For each set and each deadline / work ratio: 48 h of work, 0.2 h restart overhead, 6 start
ticks evenly spaced in every zone (scope `zone`), over each trace's zones together (scope
`multi`) and, where a trace has two or more zones of one region, over each region's zones
(scope `region`; "–" where a trace has none); ratios are per run to the optimum of the same scope, then
averaged. Writes the
section `## Spot policies (issue 12)` of docs/benchmarks.md (other sections are left alone).

    .venv/bin/python bench/bench_policies.py                 # full run, rewrites the section
    .venv/bin/python bench/bench_policies.py --no-write       # print only
    .venv/bin/python bench/bench_policies.py --set in --dev  # iterate on February alone, fast
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import time
from pathlib import Path

import numpy as np

from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import load_trace

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADING = "## Spot policies (issue 12)"
IN_SAMPLE = ["aws-v100"]
OUT_OF_SAMPLE = ["aws-v100-aug-16node", "aws-v100-aug-4node"]
POLICIES = ["mdp", "spotfit", "rollout", "uniform_progress", "greedy", "on_demand"]
# The multi-zone policies shown; the baselines launch in the cheapest up zone, their `_first`
# variants in the first up zone of the job's order (as published).
MULTI = ["mdp", "spotfit", "rollout", "uniform_progress", "greedy", "uniform_progress_first", "greedy_first"]
ABOVE = 1.02  # a window "costs more than on-demand" above this × all-on-demand from its start (issue 36)
RATIOS = [52 / 48, 1.05, 1.25, 1.5, 2.0]
DEV_STARTS = 3
AUGUST_NOTE = [
    "",
    "Designs measured on August: 9 so far; `mdp` (now the default) is the one kept. In order:",
    "`spotfit` (its constants chosen on February before August was imported); a variant of it",
    "whose single-zone reserve was capped by the restart costs to come (better on August, but it",
    "lost money in a demo window, so it was reverted); `rollout` (designed on February, measured",
    "on August once: not better than `spotfit`); `mdp` as first written, with `spotfit`'s rules",
    "for several zones (single-zone mean over the five ratios 1.103); the same after a change",
    "found on February (from trace start, with no history, it stopped a paid on-demand launch to",
    "wait and launched it again; on-demand now runs until spot is taken): 1.099; `mdp` deciding",
    "several zones too (the zones' union, chosen on February's region scopes, in-sample note):",
    "several zones 1.209; `mdp` never idling while spot can be had (found by replayed test jobs",
    "without a deadline: it waited for a young up run to last before launching; February figures",
    "unchanged): one zone 1.087, several zones 1.210; and `mdp` as now, with two changes: no spot",
    "launch whose start-up the safety rule would cut short (found on February), and, for several",
    "zones, a hop to a cheaper up zone when the price saved over its median rest of up time pays",
    "the hop's launches. The hop is the one idea taken from reading August's runs (there every",
    "multi-zone policy paid the same 1.159 at deadline / work 2: the optimum rode the cheapest",
    "zone whenever it was up, $0.394 an hour against $0.541); its form was chosen on February, where it",
    "changes nothing (in-sample note), and it was measured on August once, so its several-zone",
    "figures below are out of sample for its form, not for its idea. Ninth, the hop rate over",
    "several zones counted as the steadiest zone's falls while another zone is up (it was its",
    "falls minus the union's, 0 without history), chosen on February (in-sample note) and measured",
    "on August once before it was kept: several zones 1.169 → 1.167 over the five ratios, region",
    "scopes 1.125 → 1.129, a wash out of sample. No other design was changed because of August",
    "figures.",
    "",
    "Against issue 12's targets (out of sample, `mdp`): one zone, 1.087 × the optimum on average",
    "over the five ratios (target ≤ 1.12; per ratio 1.043 to 1.161, above 1.12 at 1.05 and",
    "52 / 48; at 52 / 48 on the 16-node trace `spotfit` is cheaper, 1.093 against 1.114);",
    "cheaper than Uniform Progress and greedy on both traces at every ratio; no deadline missed.",
    "Several zones (each trace's three): 1.083 to 1.281, mean 1.167 (target ≤ 1.10: met at 1.25",
    "and 1.5, not at 52 / 48, 1.05 and 2; `spotfit`'s rules 1.236, cheaper than `mdp` at 52 / 48).",
    "Against the published baselines over several zones (Uniform Progress as the ADRS study's",
    "multi-region starting program runs it, and greedy: the first up zone of the job's order,",
    "ridden until it falls), `mdp` is cheaper on both traces at every ratio: over each trace's",
    "zones 1.167 against 1.369 and 1.325 on average (15% below Uniform Progress; against greedy",
    "by 0.1% only at deadline / work 2 on the 16-node trace), over a region's zones 1.129 against",
    "1.234 and 1.291.",
    "",
    "Since issue 36 `uniform_progress` and `greedy` launch in the cheapest up zone over several",
    "zones, and the published behaviour (the first up zone of the job's order) is",
    "`uniform_progress_first` and `greedy_first`: the baseline figures quoted above are those of",
    "the `_first` columns. Each cell ends with the share of windows that cost more than 1.02 ×",
    "all-on-demand from the same start (issue 36's tail column; the worst window is the figure in",
    "brackets), and `mdp` runs with its default floor (`market.max_overpay`; the recorded figures",
    "were measured at 0.05 with the hard bound alone, the default before the chance bound: bench_floor.py",
    "compares the floor's versions with no floor side by side). Launching in the",
    "cheapest up zone changes the baselines little on August (over each trace's zones 1.361 and",
    "1.316 against 1.369 and 1.325 over the five ratios; over a region's zones, priced alike, not at",
    "all); on February more (all nine zones: 1.077 and 1.151 against 1.146 and 1.217; `mdp` 1.058).",
]
IN_SAMPLE_NOTE = [
    "February 2023 trace `aws-v100` (9 zones, 195 s ticks, real spot prices): every constant and",
    "design choice of the policies was made on it, so these figures guard against regressions",
    "and say nothing about other markets. `mdp` has no tuned constant (its priors are",
    "`spotfit`'s; its age buckets and grid were set once, not searched); it was chosen over",
    "`spotfit` for one zone on these figures (`--dev`, 3 starts: single-zone mean over the five",
    "ratios 1.065 against 1.130) and on short jobs like the demo's (3 h of work, 4 h deadline,",
    "0.2 h, 20 starts in each of the 9 zones: 1.058 against 1.091 × the optimum, saving in 75%",
    "of the windows against 68%). For several zones, three designs were compared here: one",
    "program per zone taking the cheapest action (all 9 zones, 3 starts: 1.105 against",
    "`spotfit`'s 1.032), and one program over the zones' union with a hop rate as `rollout` models",
    "it: over all 9 zones it costs more than `spotfit`'s rules (1.060 against 1.041, 6 starts;",
    "the start with no history costs it most), over each region's zones (2 to 4, as a job over",
    "one region uses) much less (1.075 against 1.141, 3 starts); the union program was kept.",
    "Earlier, for `spotfit`: bounding the outages to come by the spot time still needed was kept",
    "(1.117 → 1.116 at 52 / 48); an outage threshold over the zones' union was not (1.047 → 1.142).",
    "The hop to a cheaper zone (out-of-sample note) was given its form here: with each zone's mean",
    "rest of up time it hopped for 5% price gaps into zones whose runs then ended (all 9 zones, 3",
    "starts, deadline / work 2: 1.038 against 1.016 without the hop); with the median rest it",
    "changes nothing here (1.138 against 1.139 over the five ratios; region scopes 1.077 against",
    "1.076), and neither does the start-up check (one zone, 3 starts: 1.066 both). The hop rate over",
    "several zones (the ninth design of the out-of-sample note) was chosen here, 6 starts over the",
    "five ratios: all nine zones 1.106 → 1.058 (the start with no history at 1.05, 2.758 → 1.562),",
    "region scopes 1.086 → 1.091; at 1.05 over all nine zones it is now under Uniform Progress over",
    "several zones (1.171 against 1.300; before, 1.409). A launch zone chosen by the program's",
    "launch cost spread over each zone's expected rest of up time changed nothing here (all zones",
    "1.106, region scopes 1.085) and was not measured on August.",
]


def runs_of(traces: list[str], ratio: float, starts: int = 6) -> list[tuple[str, str, float, bool, bool]]:
    """(trace, policy, cost ÷ optimum, met deadline, cost > ABOVE × all-on-demand) for every run of
    one deadline ratio."""
    job = Job.from_hours(48, 48 * ratio, 0.2)
    out = []
    for name in traces:
        trace = load_trace(name)
        scopes = [(z,) for z in trace.zones] + [trace.zones] + regions(trace.zones)
        for zones in scopes:
            for start in start_ticks(trace, job, starts):
                best = simulate("optimum", trace, job, start, zones).cost_usd
                on_demand = simulate("on_demand", trace, job, start, zones).cost_usd
                for policy in POLICIES + [p for p in MULTI if p not in POLICIES]:
                    if policy not in (MULTI if len(zones) > 1 else POLICIES):  # `_first` = the same in one zone
                        continue
                    run = simulate(policy, trace, job, start, zones)
                    scope = "zone" if len(zones) == 1 else "multi" if zones == trace.zones else "region"
                    out.append((name, f"{policy}/{scope}", run.cost_usd / best, run.met_deadline,
                                run.cost_usd > ABOVE * on_demand))
    return out


def regions(zones: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Each region's zones together (a zone's name less its last letter), where a region has two
    or more of the zones but not all: a multi-zone job over one region."""
    groups: dict[str, list[str]] = {}
    for z in zones:
        groups.setdefault(z[:-1], []).append(z)
    return [tuple(g) for g in groups.values() if 1 < len(g) < len(zones)]


def table(traces: list[str], ratios: list[float], starts: int) -> list[str]:
    cols = [f"{p}/zone" for p in POLICIES] + [f"{p}/multi" for p in MULTI]
    if any(regions(load_trace(name).zones) for name in traces):
        cols += [f"{p}/region" for p in MULTI]
    lines = ["| deadline / work | " + " | ".join(f"{c} mean (worst) × opt, misses, > {ABOVE:g} × on-demand"
                                             for c in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    compared = [c for c in cols if c != "on_demand/zone"]
    per_trace = ["", f"Per trace, mean × optimum ({', '.join(compared)}):", ""]
    for ratio in ratios:
        runs = runs_of(traces, ratio, starts)
        cells = []
        for col in cols:
            rs = [r for r in runs if r[1] == col]
            to_opt = [r[2] for r in rs]
            above = np.mean([r[4] for r in rs])
            cells.append(f"{np.mean(to_opt):.3f} ({max(to_opt):.2f}), {sum(not r[3] for r in rs)}, {above:.0%}")
        lines.append(f"| {ratio:.3g} | " + " | ".join(cells) + " |")
        for name in traces:
            means = [np.mean([r[2] for r in runs if r[0] == name and r[1] == col]) for col in compared]
            per_trace.append(f"- {name} @ {ratio:.3g}: "
                             + " / ".join("–" if np.isnan(m) else f"{m:.3f}" for m in means))
    return lines + per_trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=["in", "out", "all"], default="all",
                        help="in: February only (design and tuning), out: August only (the report); all: both, "
                             "the only choice that rewrites the docs")
    parser.add_argument("--dev", action="store_true",
                        help=f"fast iteration: {DEV_STARTS} starts instead of 6; never writes the docs")
    parser.add_argument("--no-write", action="store_true", help="print, do not update the docs")
    args = parser.parse_args()
    starts = DEV_STARTS if args.dev else 6
    t0 = time.perf_counter()
    if args.set != "all" or args.dev:
        sets = {"in": [IN_SAMPLE], "out": [OUT_OF_SAMPLE], "all": [IN_SAMPLE, OUT_OF_SAMPLE]}[args.set]
        for traces in sets:
            print("\n".join([f"### {', '.join(traces)}", "", *table(traces, RATIOS, starts), ""]))
        print(f"{time.perf_counter() - t0:.0f} s")
        return
    oos = table(OUT_OF_SAMPLE, RATIOS, starts)
    ins = table(IN_SAMPLE, RATIOS, starts)
    section = "\n".join([
        HEADING,
        "",
        "1×V100 (AWS p3.2xlarge); 48 h of work, 0.2 h restart overhead, deadline = ratio × work;",
        "6 start ticks evenly spaced over each trace in every zone (`zone`), over each trace's",
        "zones together (`multi`) and over each region's zones where a trace has two or more of one",
        "region (`region`; \"–\" where it has none). Ratios are per run to the optimum of the same",
        "scope (the exact backward DP), then averaged; worst in brackets; misses = deadlines missed.",
        "Reproduce: `.venv/bin/python bench/bench_policies.py` (`--set in --dev` iterates on",
        "February alone).",
        "",
        "### Out of sample (the result)",
        "",
        "August 2023 availability counts, 300 s ticks, `aws-v100-aug-16node` + `aws-v100-aug-4node`",
        "(6 zone datasets, catalog prices: docs/market.md). Nothing in the policy was tuned on them;",
        "one idea was taken from reading them (below).",
        *AUGUST_NOTE,
        "",
        *oos,
        "",
        "### In sample",
        "",
        *IN_SAMPLE_NOTE,
        "",
        *ins,
        "",
        "Anchors: on the in-sample benchmark (52 / 48) `uniform_progress` averages 1.211 × the",
        "optimum, the figure of the published Can't Be Late simulator. The ADRS policy evolved",
        "with OpenEvolve is reported 7% below Uniform Progress in one region and 27% below a",
        "round-robin Uniform Progress across regions (on the paper's traces, 20-minute cold starts);",
        "out of sample here `mdp` is 15% below the multi-region Uniform Progress over each trace's",
        "zones (12-minute restarts, other traces), so the two are not compared run for run. ROSS",
        "(randomized, optimal competitive ratio) is not implemented here.",
        "",
        f"Machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPU cores, no GPU, load average {os.getloadavg()[0]:.1f} at the end (shared); "
        f"whole benchmark {time.perf_counter() - t0:.0f} s.",
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
