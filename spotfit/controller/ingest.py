"""What the runtime reported, copied into the state DB: its events, and the live attempt's progress.

`Controller` (loop.py) holds one `Ingest` and calls it on every pass (and when an attempt
ends): each new `events/` object becomes an event row once, and the live attempt's
`progress.json` moves the job's step and the planner's clock, and its latest GPU reading
(utilization and memory) goes into the attempt's `info["gpu"]`, where `spotfit status` reads it.
The progress and the job's spend so far also go to the publishers the spec's backend sections
name (`aws.cloudwatch: true`: CloudWatch, backends/aws/cloudwatch.py).
"""

from __future__ import annotations

from typing import Any

from spotfit.attempt import layout
from spotfit.attempt.events import as_event
from spotfit.controller.attempts import AttemptPlanner
from spotfit.controller.job_files import JobFiles
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord
from spotfit.state.states import AttemptState

# Runtime events that say where an attempt's training begins: a restored checkpoint, an earlier
# fit call's end record (the checkpoint's call ended before it), or no checkpoint at all.
START_EVENTS = ("fit_skipped", "restored", "started")  # a stop request not honoured by then becomes a SIGTERM


def live_attempt(db: StateDB, job_id: str) -> AttemptRecord | None:
    """The job's live attempt (launching or running), if any."""
    running = [a for a in db.attempts(job_id) if AttemptState(a["state"]).is_live()]
    return running[-1] if running else None


class Ingest:
    """Copies one job's new runtime events and progress into the state DB."""

    def __init__(self, db: StateDB, job_id: str, files: JobFiles, plan: AttemptPlanner):
        self.db = db
        self.job_id = job_id
        self.files = files
        self.plan = plan
        self.publishers = [p for s in plan.spec.backend_sections().values()
                           if (p := s.publisher(job_id, plan.spec.name)) is not None]
        self._seen_events: set[str] = {
            str(e["data"]["key"]) for e in db.events(job_id) if e["data"].get("key")
        }

    def __call__(self) -> None:
        """Copy new runtime events into the DB and the latest progress into the job row."""
        keys: list[str] = self.files.guard.call(lambda: self.files.store.list(layout.EVENTS), fallback=[])
        for key in keys:
            if key in self._seen_events:
                continue
            raw = self.files.read_json(key)
            if raw is None:  # missing, damaged, or the store is away: read again on the next pass
                continue
            self._seen_events.add(key)
            if (doc := as_event(raw)) is None:  # JSON, but not an event: said once, never read again
                self.db.add_event(self.job_id, "event_unreadable", f"{key} is not a runtime event: skipped", key=key)
                continue
            self.db.add_event(self.job_id, doc["kind"], doc["message"], attempt=doc["attempt"], key=key, **doc["data"])
            if doc["kind"] in START_EVENTS and "step" in doc["data"] and doc["attempt"] is not None:
                self.db.update_attempt(self.job_id, doc["attempt"], start_step=doc["data"]["step"])  # where it resumed
            if doc["data"].get("replayed") and doc["attempt"] is not None:
                self._replayed(doc["attempt"], int(doc["data"]["replayed"]))
        current = live_attempt(self.db, self.job_id)
        if current is not None:
            progress = self.files.progress(current["number"])
            if progress:
                self.plan.observe(progress, current)
                self.db.record_progress(self.job_id, progress.get("step") or 0, progress.get("total_steps"),
                                        progress.get("loss"))
                self._gpu(current, progress.get("gpu"))
                if self.publishers:
                    self._publish(current, progress)

    def _publish(self, attempt: AttemptRecord, progress: dict[str, Any]) -> None:
        """The progress and the job's spend so far (ended attempts' bills and the live one's) to the publishers."""
        spent = sum(a["cost_usd"] or 0.0 for a in self.db.attempts(self.job_id) if a["number"] != attempt["number"])
        if attempt["trace_start_s"] is not None:
            spent += self.plan.bill(attempt)[1]
        for publisher in self.publishers:
            if (problem := publisher.publish(progress, spent)) is not None:
                self.db.add_event(self.job_id, publisher.failed_event, problem, attempt=attempt["number"])

    def _replayed(self, number: int, steps: int) -> None:
        """An unmodified loop ran `steps` steps again to reach the checkpoint: the ledger counts them redone."""
        attempt = next((a for a in self.db.attempts(self.job_id) if a["number"] == number), None)
        if attempt is not None:
            info = attempt["info"]
            self.db.update_attempt(self.job_id, number, info={**info, "replayed_steps": info.get("replayed_steps", 0)
                                                               + steps})

    def _gpu(self, attempt: AttemptRecord, reading: dict[str, Any] | None) -> None:
        """Keep the attempt's latest GPU reading in its info (written only when a figure changed)."""
        if not reading:
            return
        figures = {k: v for k, v in reading.items() if k != "at"}
        known = attempt["info"].get("gpu") or {}
        if {k: v for k, v in known.items() if k != "at"} != figures:
            self.db.update_attempt(self.job_id, attempt["number"], info={**attempt["info"], "gpu": reading})
