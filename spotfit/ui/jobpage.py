"""Everything the job page shows, gathered from the SDK's documents: the ones `--json` prints.

`job_page` calls `sdk.status`, `sdk.cost` and `sdk.logs` (inside the dashboard's read-only
`sdk.reading_from` block) and turns them into the page's figures and tables with `jobview`
and `charts`. `CostCache` keeps each job's `cost` document until its attempts change: the
document replays every policy and the optimum on the job's window, which takes seconds, and
only a new or ended attempt changes it.

So the page does not wait for that replay: without `hindsight`, `job_page` takes the cached
document where there is one and otherwise the ledger alone (`ledger_only`: every attempt's
row and the totals, the very ones `cost` starts from), marked `pending`; the page then asks
for the hindsight figures (the optimum, the regret, what every policy would have paid) apart.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from spotfit import sdk
from spotfit.controller.ledger import ledger
from spotfit.state.records import AttemptRecord, JobRecord, raw_spec_of
from spotfit.state.states import AttemptState, JobState
from spotfit.ui import charts, jobview
from spotfit.ui.scalars import scalars


class CostCache:
    """`sdk.cost` per job, recomputed only when the job's attempts or step total change."""

    def __init__(self, size: int = 64):
        self._docs: OrderedDict[tuple, dict] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    @staticmethod
    def _key(job: JobRecord, attempts: list[AttemptRecord]) -> tuple:
        return (job["id"], job["total_steps"], job["state"],
                tuple((a["number"], a["state"], a["cost_usd"], a["end_step"]) for a in attempts))

    def peek(self, job: JobRecord, attempts: list[AttemptRecord]) -> dict | None:
        """The cached document for the job as it is now, or None (without computing it)."""
        with self._lock:
            return self._docs.get(self._key(job, attempts))

    def get(self, job: JobRecord, attempts: list[AttemptRecord]) -> dict:
        key = self._key(job, attempts)
        with self._lock:
            if key in self._docs:
                self._docs.move_to_end(key)
                return self._docs[key]
        doc = {**sdk.cost(job["id"]), "pending": False}
        with self._lock:
            self._docs[key] = doc
            while len(self._docs) > self._size:
                self._docs.popitem(last=False)
        return doc


def ledger_only(job: JobRecord, attempts: list[AttemptRecord]) -> dict:
    """`sdk.cost`'s document before its hindsight replay: the ledger's rows and totals, `pending`.

    >>> ledger_only({"id": "a-1", "name": "a", "state": "running", "total_steps": 10}, [])["pending"]
    True
    """
    return {"id": job["id"], "name": job["name"], "state": job["state"], "policy": None,
            **ledger(attempts, job["total_steps"]), "hindsight": {"window": None, "note": None}, "pending": True}


def with_hindsight(ref: str, costs: CostCache) -> dict:
    """What the page's summary and ledger show once the hindsight figures are in: `status` and the full `cost`."""
    status = sdk.status(ref)
    return {"status": status, "cost": costs.get(sdk.db().get_job(status["id"]), sdk.db().attempts(status["id"]))}


def job_page(ref: str, costs: CostCache) -> dict:
    """The page's documents (`status`, `cost`, `logs`), its figures and its tables for job `ref`.

    `cost` is the cached full document, or the ledger alone (`cost["pending"]`): the page then
    fetches `with_hindsight` apart.
    """
    status = sdk.status(ref)
    job = sdk.db().get_job(status["id"])
    attempts = sdk.db().attempts(status["id"])
    cost = costs.peek(job, attempts) or ledger_only(job, attempts)
    logs = sdk.logs(status["id"])
    replay = jobview.market_of(raw_spec_of(job))
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
