"""The cost ledger: what each attempt cost, what all-on-demand would have cost, what was wasted.

A pure function of the attempts recorded in the state DB (trace time, trace prices):

- spent: the sum of the attempts' costs (per-second billing, 60 s minimum per launch);
- on-demand equivalent: one uninterrupted on-demand run of the same work: the first launch's
  start-up overhead plus every step once, at the rate the attempts measured;
- waste: steps trained twice (work lost between the last checkpoint and a preemption) and the
  restart overhead of every launch after the first, with their cost at the spot price paid;
  `steps_redone` also counts the steps an unmodified custom loop ran again to reach its
  checkpoint (`info.replayed_steps`, from the runtime's `replaying` and `fit_skipped` events),
  whose time is already in the attempt's restart overhead (its first step comes after them), so
  their dollars are not counted twice;
- work done: the trace seconds of the steps reached, at the rate the attempts measured (what
  `spotfit cost` replays every policy and the optimum on, see `hindsight`).

Each attempt's row also names the policy's `decision` it carried out (`spot:ZONE`, `on_demand`),
recorded at its launch: the `Decision` travels unchanged from the policy to the launch request and
here; and its `price_source`, recorded at its end: where its $/h came from (`trace`, `spot price
history`, and on Kubernetes its nodes' `aws spot price history`, `catalog` or
`kubernetes.price_usd_per_h`), and what it `runs_on` (`A100×4 on aws`: a job moved by `spotfit resume
JOB --accelerator A100 --count 4` shows both parts).

Example:

>>> rows = [{"number": 1, "market": "spot", "zone": "z", "state": "completed", "start_step": 0,
...          "end_step": 100, "trace_start_s": 0.0, "trace_end_s": 3600.0, "billed_s": 3600.0,
...          "cost_usd": 1.0, "info": {"timings": {"first_step_s": 6.0}, "time_scale": 100.0,
...          "on_demand_usd_per_h": 3.06}}]
>>> ledger(rows, total_steps=100)["totals"]["savings_pct"]
67.3
"""

from __future__ import annotations

from typing import Any, cast

from spotfit.state.records import AttemptRecord
from spotfit.state.states import AttemptState


def _overhead_s(attempt: AttemptRecord) -> float:
    """Trace seconds of restart overhead: the modeled one a replay billed, else launch to first step."""
    info = attempt.get("info") or {}
    if info.get("overhead_s") is not None:
        return float(info["overhead_s"])
    first = (info.get("timings") or {}).get("first_step_s")
    if first is None:
        return float(attempt.get("billed_s") or 0.0) if not _steps(attempt) else 0.0
    return cast(float, min(first * info.get("time_scale", 1.0), float(attempt.get("billed_s") or 0.0)))


def _steps(attempt: AttemptRecord) -> int:
    return max(0, (attempt.get("end_step") or 0) - (attempt.get("start_step") or 0))


def ledger(attempts: list[AttemptRecord], total_steps: int | None) -> dict[str, Any]:
    """Per-attempt rows and totals; see the module docstring for the definitions."""
    rows, spent, redone, restart_s, waste_usd = [], 0.0, 0, 0.0, 0.0
    od_price = next((a["info"].get("on_demand_usd_per_h") for a in attempts
                     if (a.get("info") or {}).get("on_demand_usd_per_h")), None)
    best_step = 0
    productive_s, productive_steps = 0.0, 0
    billed_attempts = [a for a in attempts if a.get("billed_s") is not None and a["state"] != AttemptState.NO_CAPACITY]
    for i, a in enumerate(billed_attempts):
        billed, cost = float(a["billed_s"] or 0.0), float(a["cost_usd"] or 0.0)  # billed_s is set (above)
        price = cost / (billed / 3600.0) if billed else 0.0
        overhead = _overhead_s(a)
        lost = max(0, best_step - (a.get("start_step") or 0))
        steps = _steps(a)
        per_step = (billed - overhead) / steps if steps else 0.0
        if steps:
            productive_s += billed - overhead
            productive_steps += steps
        redone += lost + int((a.get("info") or {}).get("replayed_steps") or 0)
        wasted = (overhead if i > 0 else 0.0) + lost * per_step
        if i > 0:
            restart_s += overhead
        waste_usd += wasted / 3600.0 * price
        best_step = max(best_step, a.get("end_step") or 0)
        spent += cost
        rows.append({
            "attempt": a["number"], "state": a["state"], "market": a["market"], "zone": a["zone"],
            "start_s": a["trace_start_s"], "end_s": a["trace_end_s"], "billed_s": round(billed, 3),
            "price_usd_per_h": round(price, 6), "cost_usd": round(cost, 6),
            "start_step": a.get("start_step"), "end_step": a.get("end_step"),
            "steps_replayed": int((a.get("info") or {}).get("replayed_steps") or 0),  # a custom loop's, run again
            "waste_usd": round(wasted / 3600.0 * price, 6),
            "failure": (a.get("info") or {}).get("failure"),  # what counted toward max_failures (not host_crash)
            "decision": (a.get("info") or {}).get("decision"),  # the policy's, as it launched: spot:ZONE, on_demand
            "price_source": (a.get("info") or {}).get("price_source"),  # trace, catalog, aws spot price history, ...
            "runs_on": (a.get("info") or {}).get("runs_on"),  # CPU×2 on local, A100×4 on aws in us-east-1a, ...
        })
    on_demand = done_s = None
    if productive_steps:
        per_step_s = productive_s / productive_steps
        done_s = per_step_s * best_step
        if od_price:
            work_s = per_step_s * (total_steps or best_step)
            on_demand = max(_overhead_s(attempts[0]) + work_s, 60.0) / 3600.0 * od_price
    savings = round(100.0 * (1.0 - spent / on_demand), 1) if on_demand else None
    return {
        "rows": rows,
        "totals": {
            "spent_usd": round(spent, 6),
            "on_demand_usd": round(on_demand, 6) if on_demand is not None else None,
            "savings_usd": round(on_demand - spent, 6) if on_demand is not None else None,
            "savings_pct": savings,
            "steps_redone": redone,
            "restart_overhead_s": round(restart_s, 3),
            "waste_usd": round(waste_usd, 6),
            "work_done_s": round(done_s, 3) if done_s is not None else None,
        },
    }
