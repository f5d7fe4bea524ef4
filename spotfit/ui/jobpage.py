"""Everything the job page shows, gathered from the SDK's documents: the ones `--json` prints.

`job_page` calls `sdk.status`, `sdk.cost` and `sdk.logs` (inside the dashboard's read-only
`sdk.reading_from` block) and turns them into the page's figures and tables with `jobview`
and `charts`. `CostCache` keeps each job's `cost` document until its attempts change: the
document replays every policy and the optimum on the job's window, which takes a second, and
only a new or ended attempt changes it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from spotfit import sdk
from spotfit.states import AttemptState, JobState
from spotfit.ui import charts, jobview
from spotfit.ui.scalars import scalars


class CostCache:
    """`sdk.cost` per job, recomputed only when the job's attempts or step total change."""

    def __init__(self, size: int = 64):
        self._docs: OrderedDict[tuple, dict] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, job: dict, attempts: list[dict]) -> dict:
        key = (job["id"], job["total_steps"], job["state"],
               tuple((a["number"], a["state"], a["cost_usd"], a["end_step"]) for a in attempts))
        with self._lock:
            if key in self._docs:
                self._docs.move_to_end(key)
                return self._docs[key]
        doc = sdk.cost(job["id"])
        with self._lock:
            self._docs[key] = doc
            while len(self._docs) > self._size:
                self._docs.popitem(last=False)
        return doc


def job_page(ref: str, costs: CostCache) -> dict:
    """The page's documents (`status`, `cost`, `logs`), its figures and its tables for job `ref`."""
    status = sdk.status(ref)
    job = sdk.db().get_job(status["id"])
    attempts = sdk.db().attempts(status["id"])
    cost = costs.get(job, attempts)
    logs = sdk.logs(status["id"])
    replay = jobview.market_of(json.loads(job["spec_json"]))
    active = not JobState(status["state"]).is_terminal()
    now_s = job["trace_now_s"] if active and job["trace_now_s"] else None
    running = next((a for a in status["attempts"] if AttemptState(a["state"]).is_live()), None)
    timeline = jobview.timeline(status, logs["events"], replay, now_s)
    curve = jobview.cost_curve(cost, replay, running, now_s)
    return {
        "status": status, "cost": cost, "active": active,
        "rules": jobview.rule_firings(logs["events"]),
        "events": logs["events"][-40:], "log_attempt": logs["attempt"], "log_tail": jobview.log_tail(logs["log"]),
        "figures": {
            "progress": charts.progress_figure(scalars(status["store"])),
            "cost": charts.cost_figure(curve),
            "timeline": charts.timeline_figure(timeline),
        },
    }
