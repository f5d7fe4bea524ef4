"""The Sweeps pages' data: each sweep's leaderboard, the very `spotfit sweep status --json` document.

The leaderboard comes from `spotfit.sweep.report.status`, the function `sweep.api.status` (the
CLI's `--json`) calls, here over the dashboard's read-only connections. The list page adds to
each document what the sweep's row says of it (its base job, when it started, its objective);
one sweep's page (`page`) adds its charts, and whether it still runs (the page polls for news
while it does).

Example:

>>> row = {"id": "d-sweep-ab12cd", "name": "d", "created_at": 0.0,
...        "spec_json": '{"objective": {"metric": "val_accuracy", "mode": "max"}}'}
>>> doc = {"id": "d-sweep-ab12cd", "trials": [{"state": "completed"}, {"state": "running"}]}
>>> summary = list_row(row, doc)
>>> summary["objective"], summary["trials_done"], summary["trials_total"]
({'metric': 'val_accuracy', 'mode': 'max'}, 1, 2)
"""

from __future__ import annotations

import json

from spotfit.state.db import StateDB
from spotfit.sweep import report
from spotfit.sweep.runner import FINAL
from spotfit.sweep.store import SweepDB
from spotfit.ui import charts


def leaderboard(sweeps: SweepDB, jobs: StateDB, ref: str) -> dict:
    """`spotfit sweep status REF --json`."""
    return report.status(sweeps, jobs, sweeps.get_sweep(ref))


def leaderboards(sweeps: SweepDB, jobs: StateDB) -> list[tuple[dict, dict]]:
    """Every sweep, newest first: (its row, its leaderboard)."""
    return [(row, report.status(sweeps, jobs, row)) for row in sweeps.list_sweeps()]


def objective(row: dict) -> dict:
    """The sweep's objective, `{metric, mode}`, as its sweep file set it."""
    return json.loads(row["spec_json"])["objective"]


def list_row(row: dict, doc: dict) -> dict:
    """One line of the sweeps list: the leaderboard with the sweep's name, start and objective."""
    return {**doc, "name": row["name"], "created_at": row["created_at"], "objective": objective(row),
            "trials_done": sum(t["state"] in FINAL for t in doc["trials"]), "trials_total": len(doc["trials"])}


def page(sweeps: SweepDB, jobs: StateDB, ref: str) -> dict:
    """One sweep's page: its leaderboard, row, objective, parameter names, figures, and whether it runs."""
    row = sweeps.get_sweep(ref)
    doc = leaderboard(sweeps, jobs, row["id"])
    goal = objective(row)
    figures = {"parallel": charts.sweep_parallel_figure(doc, goal["metric"]),
               "history": charts.sweep_history_figure(doc, goal["metric"], goal["mode"])}
    return {"sweep": doc, "row": row, "objective": goal, "active": doc["state"] == "running",
            "names": sorted({n for t in doc["trials"] for n in t["params"]}), "figures": figures}
