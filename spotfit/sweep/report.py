"""What a sweep shows: the leaderboard document, and the comparison page with Optuna's plots.

`status` builds `spotfit sweep status --json`: `{id, state, trials: [{number, params, state,
value, cost_usd, job_id}], best: {number, params, value}, totals: {spent_usd,
saved_by_pruning_usd}}`. A pruned trial saved what finishing it would have cost: its training
cost so far (its bill less the launches' modeled overhead) times the steps it did not run over
the steps it ran (`saved_usd`).

Example:

>>> saved_usd(cost_usd=0.3, step=25, total_steps=100)
0.9
>>> saved_usd(cost_usd=0.3, step=0, total_steps=100)
0.0
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord
from spotfit.sweep.store import SweepDB

PRUNED = ("pruned", "paused", "pausing", "pruning")


def saved_usd(cost_usd: float, step: int, total_steps: int | None) -> float:
    """What the rest of a stopped trial would have cost, at the cost per step it ran at."""
    if not step or not total_steps or total_steps <= step:
        return 0.0
    return round(cost_usd * (total_steps - step) / step, 6)


def training_usd(attempts: list[AttemptRecord]) -> float:
    """What the attempts' training cost: each one's bill less its share of modeled launch overhead."""
    total = 0.0
    for a in attempts:
        billed_s, overhead_s = a["billed_s"] or 0.0, (a.get("info") or {}).get("overhead_s") or 0.0
        if billed_s > 0:
            total += (a["cost_usd"] or 0.0) * max(billed_s - overhead_s, 0.0) / billed_s
    return total


def best_trial(rows: list[dict[str, Any]], mode: str) -> dict[str, Any] | None:
    """The completed trial with the best value (the earliest of equals), or None."""
    done = [r for r in rows if r["state"] == "completed" and r["value"] is not None]
    sign = 1 if mode == "max" else -1
    return max(done, key=lambda r: (sign * r["value"], -r["number"]), default=None)


def status(sweeps: SweepDB, jobs: StateDB, sweep: dict[str, Any], detail: bool = False) -> dict[str, Any]:
    """The leaderboard; with `detail`, also each trial's steps and the sweep's message (the table)."""
    spec = json.loads(sweep["spec_json"])
    rows, saved = [], 0.0
    for trial in sweeps.trials(sweep["id"]):
        job = jobs.get_job(trial["job_id"]) if trial["job_id"] else None
        cost = sum(a["cost_usd"] or 0.0 for a in jobs.attempts(job["id"])) if job else 0.0
        row = {"number": trial["number"], "params": trial["params"], "state": trial["state"],
               "value": trial["value"], "cost_usd": round(cost, 6), "job_id": trial["job_id"]}
        if trial["state"] in PRUNED and job:
            saved += saved_usd(training_usd(jobs.attempts(job["id"])), job["step"], job["total_steps"])
        if detail:
            row.update(steps=job["step"] if job else 0, total_steps=job["total_steps"] if job else None,
                       promotions=trial["promotions"])
        rows.append(row)
    best = best_trial(rows, spec["objective"]["mode"])
    doc = {"id": sweep["id"], "state": sweep["state"], "trials": rows,
           "best": {"number": best["number"], "params": best["params"], "value": best["value"]} if best else None,
           "totals": {"spent_usd": round(sum(r["cost_usd"] for r in rows), 6),
                      "saved_by_pruning_usd": round(saved, 6)}}
    if detail:
        doc.update(message=sweep["message"], objective=spec["objective"])
    return doc


def write_compare(sweeps: SweepDB, jobs: StateDB, sweep: dict[str, Any], out: str | None) -> dict[str, Any]:
    """The comparison page: the leaderboard table and Optuna's plots (plotly.js inline, no CDN)."""
    from spotfit.sweep import study
    from spotfit.sweep.spec import SweepSpec

    doc = status(sweeps, jobs, sweep, detail=True)
    spec = SweepSpec.model_validate(json.loads(sweep["spec_json"]))
    names = list(spec.params)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["trial", *names, spec.objective.metric, "state",
                                                          "steps", "cost $", "job"])
    body = []
    for r in doc["trials"]:
        cells = [r["number"], *(r["params"].get(n) for n in names),
                 "" if r["value"] is None else f"{r['value']:.4g}", r["state"], r["steps"], f"{r['cost_usd']:.4f}",
                 r["job_id"] or ""]
        body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    figures = "".join(f"<h2>{html.escape(t)}</h2>{div}" for t, div in study.figures_html(sweep["id"], spec))
    best = doc["best"]
    summary = (f"best trial {best['number']}: {spec.objective.metric} = {best['value']:.4g}, params "
               f"{html.escape(json.dumps(best['params']))}" if best else "no completed trial yet")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(sweep['id'])}</title>"
            "<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            f"padding:2px 6px}}</style></head><body><h1>Sweep {html.escape(sweep['id'])}</h1>"
            f"<p>{html.escape(doc['state'])}; {summary}; spent ${doc['totals']['spent_usd']:.4f}, pruning saved "
            f"${doc['totals']['saved_by_pruning_usd']:.4f}</p><table><tr>{head}</tr>{''.join(body)}</table>"
            f"{figures}</body></html>")
    path = Path(out or f"{sweep['id']}-compare.html")
    path.write_text(page, encoding="utf-8")
    return {"id": sweep["id"], "path": str(path.resolve())}
