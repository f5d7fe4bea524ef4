"""Replay a trace tick by tick and account for what a policy's decisions cost.

The model (the accounting of the published simulators of this research line):

- time is slotted in ticks of `trace.gap_s`; at the start of each tick the job runs on NONE,
  SPOT in a zone whose spot is available this tick, or ON_DEMAND;
- a running spot instance whose zone is unavailable at the start of a tick is preempted
  (progress is kept) and the policy is asked again with the mode set to NONE;
- every fresh launch (from NONE, after a preemption, or on a switch of type or zone) starts with
  `overhead_s` of start-up: each billed tick pays the remaining overhead first and the rest of the
  tick is progress;
- a billed tick costs price × gap (that tick's spot price in the zone, or on-demand);
- the job ends when progress reaches `work_s`, its last tick billed in full; it meets the
  deadline when that moment is at or before `deadline_s`.

Example:

>>> from spotfit.market.trace import load_trace
>>> trace = load_trace("aws-v100")
>>> job = Job.from_hours(work_h=48, deadline_h=52, overhead_h=0.2)
>>> run = simulate("on_demand", trace.select(["us-west-2b"]), job, start_tick=0)
>>> run.met_deadline, round(run.cost_usd, 2), run.launches
(True, 147.52, 1)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from spotfit.errors import UsageError
from spotfit.market import stopping
from spotfit.market.job import Job as Job  # re-exported: `from spotfit.market.simulator import Job`
from spotfit.market.policies.base import (
    NONE,
    Context,
    Decision,
    InvalidDecision,
    Kind,
    Policy,
    make_policy,
)
from spotfit.market.trace import Trace
from spotfit.market.view import MarketView


@dataclass(frozen=True)
class RunResult:
    """One simulated job: what it cost, when it finished, how often it launched."""

    policy: str
    zone: str  # the zone, or "*" for a multi-zone run
    start_tick: int
    cost_usd: float
    met_deadline: bool
    finish_h: float
    launches: int
    preemptions: int
    spot_h: float
    on_demand_h: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# Ticks one plan or grid may simulate (runs × ticks to each run's deadline). The default policy
# decides in about 0.1 ms a tick on this project's 2-core machine: the demo's plan is 4,700 ticks
# (0.5 s); a 1 s tick over its 4 h deadline asked for 907,000 and took 97 s. The cap is about 20 s.
MAX_SIMULATED_TICKS = 200_000


def run_ticks(job: Job, gap_s: float) -> int:
    """The most ticks `simulate` may take for `job` on a trace of `gap_s` seconds."""
    return math.ceil((job.deadline_s + job.work_s + job.overhead_s) / gap_s) * 4 + 8


def check_ticks(job: Job, gap_s: float, runs: int) -> None:
    """Raise UsageError when `runs` simulations of `job` span more than `MAX_SIMULATED_TICKS` ticks to the deadline.

    >>> check_ticks(Job.from_hours(3, 4), 195, 120)
    >>> check_ticks(Job.from_hours(3, 4), 1, 120)
    Traceback (most recent call last):
    ...
    spotfit.errors.UsageError: The simulation is too large: 120 runs of 15,120 ticks of 1 s to the deadline, ...
    """
    window = math.ceil((job.deadline_s + job.overhead_s) / gap_s)
    if runs * window > MAX_SIMULATED_TICKS:
        raise UsageError(
            f"The simulation is too large: {runs} runs of {window:,} ticks of {gap_s:g} s to the deadline, "
            f"expected at most {MAX_SIMULATED_TICKS:,} ticks in all.",
            hint="Use the trace's own tick (leave `market.gap_s` out), fewer starts (--starts) or zones, or a "
                 "shorter deadline.")


def start_ticks(trace: Trace, job: Job, n: int) -> list[int]:
    """`n` start ticks evenly spaced from 0 to the last one that leaves a whole deadline window."""
    if n < 1:
        raise UsageError(f"Invalid `starts`: received {n}, expected an integer >= 1.",
                         hint="Pass --starts 6.")
    window = math.ceil(job.deadline_s / trace.gap_s)
    last = trace.n_ticks - window
    if last < 0:
        raise UsageError(
            f"The trace is too short for this deadline: {trace.n_ticks} ticks of {trace.gap_s} s "
            f"< {job.deadline_s / 3600:g} h; expected a trace at least as long as the deadline.",
            hint="Shorten --deadline-h or use a longer trace.",
        )
    return sorted({int(round(x)) for x in np.linspace(0, last, n)})


def simulate(policy: Policy | str, trace: Trace, job: Job, start_tick: int = 0,
             zones: list[str] | tuple[str, ...] | None = None) -> RunResult:
    """Run one job from `start_tick`, asking `policy` once per tick (offline ones are solved)."""
    if isinstance(policy, str):
        policy = make_policy(policy)
    zones = tuple(zones or trace.zones)
    label = zones[0] if len(zones) == 1 else "*"
    if getattr(policy, "offline", False):
        solved: RunResult = policy.solve(trace, job, start_tick, zones)  # type: ignore[attr-defined]
        return solved
    policy.reset()
    view = MarketView.of_trace(trace, start_tick)
    zone_row: dict[str | None, int] = {z: trace.zone_index(z) for z in zones}
    rows = list(zone_row.values())
    gap = trace.gap_s
    avail, spot_price, od_price = trace.available, trace.spot_usd_per_h, trace.on_demand_usd_per_h
    n_ticks = trace.n_ticks
    mode, overhead_left, done, cost = NONE, 0.0, 0.0, 0.0
    launches = preemptions = 0
    spot_s = od_s = 0.0
    limit = run_ticks(job, gap)
    for t in range(limit):
        if t % stopping.EVERY == 0:
            stopping.check()
        a = start_tick + t
        view.tick = a
        last = min(a, n_ticks - 1)
        preempted = False
        if mode.kind is Kind.SPOT and not (a < n_ticks and avail[zone_row[mode.zone], a]):
            mode, overhead_left, preempted = NONE, 0.0, True
            preemptions += 1
        ctx = Context(t * gap, gap, job.work_s, done, job.deadline_s, job.overhead_s, mode,
                      overhead_left, view, zones, preempted, cost, job.max_overpay)
        decision = policy.decide(ctx)
        if decision.kind is Kind.NONE:
            mode, overhead_left = NONE, 0.0
            continue
        if decision != mode:
            _check(decision, zone_row, avail, a, n_ticks, policy)
            launches += 1
            overhead_left = job.overhead_s
            mode = decision
        if mode.kind is Kind.SPOT:
            price = float(spot_price[zone_row[mode.zone], last])
            spot_s += gap
        else:
            price = float(np.min(od_price[rows, last]))
            od_s += gap
        cost += price * gap / 3600.0
        pay = min(overhead_left, gap)
        overhead_left -= pay
        gain = gap - pay
        if done + gain >= job.work_s - 1e-9:
            finish_s = t * gap + pay + (job.work_s - done)
            return RunResult(policy.name, label, start_tick, cost,
                             finish_s <= job.deadline_s + 1e-6, finish_s / 3600.0, launches,
                             preemptions, spot_s / 3600.0, od_s / 3600.0)
        done += gain
    raise InvalidDecision(f"policy {policy.name!r} did not finish the job within {limit} ticks")


def _check(decision: Decision, zone_row: dict[str | None, int], avail: np.ndarray, a: int, n_ticks: int,
           policy: Policy) -> None:
    if decision.kind is not Kind.SPOT:
        return
    row = zone_row.get(decision.zone)
    if row is None:
        raise InvalidDecision(f"policy {policy.name!r} chose zone {decision.zone!r}, "
                              f"not one of {', '.join(map(str, zone_row))}")
    if not (a < n_ticks and avail[row, a]):
        raise InvalidDecision(f"policy {policy.name!r} chose spot in {decision.zone!r} at tick "
                              f"{a}, where spot is unavailable")


def run_grid(trace: Trace, job: Job, policies: list[str], starts: int,
             zones: list[str] | None = None) -> list[RunResult]:
    """Every policy from `starts` start ticks in each zone, and over all zones together.

    Single-zone policies run once per zone; multi-zone ones (and `optimum`, the bound of both)
    also run over all the given zones together (zone "*") when there are two or more.
    """
    trace = trace.select(zones)
    ticks = start_ticks(trace, job, starts)
    multi = len(trace.zones) > 1
    check_ticks(job, trace.gap_s, len(policies) * len(ticks) * (len(trace.zones) + multi))
    runs = []
    for name in policies:
        policy = make_policy(name)
        for zone in trace.zones:
            runs += [simulate(policy, trace, job, s, (zone,)) for s in ticks]
        if len(trace.zones) > 1 and (policy.multi_zone or getattr(policy, "offline", False)):
            runs += [simulate(policy, trace, job, s, trace.zones) for s in ticks]
    return runs


def summarize(runs: list[RunResult]) -> list[dict[str, Any]]:
    """Per policy and scope ("zone" or "multi"): mean and worst cost ratio to `optimum`, misses."""
    best = {(r.zone, r.start_tick): r.cost_usd for r in runs if r.policy == "optimum"}
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in runs:
        groups.setdefault((r.policy, "multi" if r.zone == "*" else "zone"), []).append(r)
    out = []
    for (name, scope), rs in groups.items():
        ratios = [r.cost_usd / best[(r.zone, r.start_tick)] for r in rs
                  if best.get((r.zone, r.start_tick))]
        out.append({
            "policy": name,
            "scope": scope,
            "runs": len(rs),
            "mean_cost_usd": float(np.mean([r.cost_usd for r in rs])),
            "mean_ratio_to_optimum": float(np.mean(ratios)) if ratios else None,
            "worst_ratio_to_optimum": float(np.max(ratios)) if ratios else None,
            "misses": sum(not r.met_deadline for r in rs),
            "mean_launches": float(np.mean([r.launches for r in rs])),
        })
    return out
