"""Spend across jobs: each job's own cost document (`sdk.cost`), summed by a label, backend or zone.

A pure function over the documents `spotfit cost JOB --json` prints, so that `spotfit cost
--all` and the dashboard's Costs page add up the very numbers each job's ledger shows:

- spent, waste: the sums of the jobs' (for `zone`: of their attempts') figures;
- on-demand equivalent and savings: over the jobs that have one (a job with no billed step has
  none), savings = on-demand − spent of those jobs, `savings_pct` its share of the on-demand cost;
- regret: spent ÷ optimum over the jobs that have a hindsight optimum (spend-weighted, so a
  large job weighs more than a small one);
- days: spent per UTC day of each attempt's launch (wall clock) and group: a group's days add
  up to its spent.

Grouped by `zone`, a job that ran in several zones gives each zone its attempts' spend and
waste, and a share of its on-demand equivalent and optimum in proportion to the steps first
trained there (steps trained again after a preemption count where they were first trained).

Example:

>>> doc = {"rows": [{"attempt": 1, "zone": "z1", "cost_usd": 1.0, "waste_usd": 0.1, "start_step": 0,
...                  "end_step": 100}], "totals": {"spent_usd": 1.0, "on_demand_usd": 3.0, "savings_usd": 2.0,
...                  "waste_usd": 0.1, "optimum_usd": 0.8}}
>>> job = {"id": "a-1", "name": "a", "state": "completed", "created_at": 0.0,
...        "spec_json": '{"labels": {"project": "nlp"}}'}
>>> out = spend([(job, [{"number": 1, "started_at": 0.0}], doc)], by="project")
>>> out["groups"][0]["group"], out["totals"]["savings_pct"], out["totals"]["regret"]
('nlp', 66.7, 1.25)
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from spotfit.spec.labels import UNLABELED, group_of
from spotfit.state.records import AttemptRecord, JobRecord, raw_spec_of

BY_FIXED = ("backend", "zone")  # every other `by` is a label key
_JOB_FIGURES = ("spent_usd", "on_demand_usd", "savings_usd", "waste_usd", "optimum_usd")
_SUMS = ("spent_usd", "on_demand_usd", "spent_with_on_demand_usd", "waste_usd", "optimum_usd",
         "spent_with_optimum_usd")


def spend(entries: list[tuple[JobRecord, list[AttemptRecord], dict[str, Any]]], by: str) -> dict[str, Any]:
    """`groups` (sorted by spend, largest first), `totals`, `days` and `jobs` over (job, attempts, cost doc)."""
    return spend_of([entry_of(job, attempts, doc) for job, attempts, doc in entries], by)


def entry_of(job: JobRecord, attempts: list[AttemptRecord], doc: dict[str, Any]) -> dict[str, Any]:
    """What `spend_of` needs of one job, whatever the grouping: small, and kept beside an ended job's document
    (`cost_doc.py`), so that `cost --all` reads neither its attempts, nor its spec, nor its whole document.

    `rows`: per ledger row, [zone, cost, waste, start step, end step, UTC day its attempt was launched].
    """
    raw = raw_spec_of(job)
    launched = {a["number"]: a.get("started_at") for a in attempts}
    totals = doc["totals"]
    return {
        "id": job["id"], "name": job["name"], "state": job["state"], "created_at": job["created_at"],
        "labels": raw.get("labels") or {}, "backend": raw.get("backend", "local"),
        "rows": [[row.get("zone"), float(row["cost_usd"] or 0.0), float(row.get("waste_usd") or 0.0),
                  row.get("start_step") or 0, row.get("end_step") or 0, _day(launched.get(row["attempt"]))]
                 for row in doc["rows"]],
        "totals": {k: totals.get(k) for k in (*_JOB_FIGURES, "regret")},
    }


def spend_of(entries: list[dict[str, Any]], by: str) -> dict[str, Any]:
    """`spend` over the jobs' entries (`entry_of`); `jobs` by creation, oldest first."""
    groups: dict[str, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(_SUMS, 0.0) | {"jobs": set()})
    days: dict[tuple[str, str], float] = defaultdict(float)
    jobs = []
    for entry in sorted(entries, key=lambda e: (e["created_at"], e["id"])):
        shares = _shares(entry, by)
        for group, share in shares.items():
            _add(groups[group], entry["id"], share)
        for zone, cost, _waste, _start, _end, day in entry["rows"]:
            group = (zone or UNLABELED) if by == "zone" else next(iter(shares))
            days[(day, group)] += cost
        totals = entry["totals"]
        jobs.append({
            **{k: entry[k] for k in ("id", "name", "state", "created_at", "labels", "backend")},
            "groups": sorted(shares), **{k: totals.get(k) for k in _JOB_FIGURES}, "regret": totals.get("regret"),
        })
    total: dict[str, Any] = dict.fromkeys(_SUMS, 0.0) | {"jobs": set()}
    for sums in groups.values():
        for key in _SUMS:
            total[key] += sums[key]
        total["jobs"] |= sums["jobs"]
    rows = [{"group": name, **_figures(sums)} for name, sums in groups.items()]
    return {
        "by": by,
        "groups": sorted(rows, key=lambda r: (-r["spent_usd"], r["group"])),
        "totals": _figures(total),
        "days": [{"day": day, "group": group, "spent_usd": round(usd, 6)}
                 for (day, group), usd in sorted(days.items())],
        "jobs": jobs,
    }


def _shares(entry: dict[str, Any], by: str) -> dict[str, dict[str, Any]]:
    """The job's figures per group: all of them in one group, or (`zone`) split over its attempts' zones."""
    totals = entry["totals"]
    whole = {
        "spent_usd": totals["spent_usd"], "waste_usd": totals["waste_usd"],
        "on_demand_usd": totals.get("on_demand_usd"), "optimum_usd": totals.get("optimum_usd"),
    }
    if by != "zone":
        group = entry["backend"] if by == "backend" else group_of(entry["labels"], by)
        return {group: {**whole, "weight": 1.0}}
    spent: dict[str, float] = defaultdict(float)
    waste: dict[str, float] = defaultdict(float)
    first: dict[str, int] = defaultdict(int)  # steps first trained in the zone
    best = 0
    for zone_or_none, cost, row_waste, start, end, _day_launched in entry["rows"]:
        zone = zone_or_none or UNLABELED
        spent[zone] += cost
        waste[zone] += row_waste
        first[zone] += max(0, end - max(best, start))
        best = max(best, end)
    steps = sum(first.values())
    return {zone: {**whole, "spent_usd": spent[zone], "waste_usd": waste[zone],
                   "weight": first[zone] / steps if steps else 0.0} for zone in spent}


def _add(sums: dict[str, Any], job_id: str, share: dict[str, Any]) -> None:
    sums["jobs"].add(job_id)
    sums["spent_usd"] += share["spent_usd"]
    sums["waste_usd"] += share["waste_usd"]
    if share["on_demand_usd"] is not None:
        sums["on_demand_usd"] += share["on_demand_usd"] * share["weight"]
        sums["spent_with_on_demand_usd"] += share["spent_usd"]
    if share["optimum_usd"] is not None:
        sums["optimum_usd"] += share["optimum_usd"] * share["weight"]
        sums["spent_with_optimum_usd"] += share["spent_usd"]


def _figures(sums: dict[str, Any]) -> dict[str, Any]:
    on_demand, optimum = sums["on_demand_usd"], sums["optimum_usd"]
    saved = on_demand - sums["spent_with_on_demand_usd"]
    return {
        "jobs": len(sums["jobs"]),
        "spent_usd": round(sums["spent_usd"], 6),
        "on_demand_usd": round(on_demand, 6) if on_demand else None,
        "savings_usd": round(saved, 6) if on_demand else None,
        "savings_pct": round(100.0 * saved / on_demand, 1) if on_demand else None,
        "waste_usd": round(sums["waste_usd"], 6),
        "optimum_usd": round(optimum, 6) if optimum else None,
        "regret": round(sums["spent_with_optimum_usd"] / optimum, 3) if optimum else None,
    }


def _day(ts: float | None) -> str:
    return datetime.fromtimestamp(ts or 0.0, UTC).date().isoformat()
