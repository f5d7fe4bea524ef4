"""Recording an attempt's end: its bill, the `info` the ledger reads, the job's step and one event.

`Controller` (loop.py) holds one `EndRecorder`; once the loop knows how an attempt ended (its
outcome, exit code and failure kind), `record` writes it in the order the ledger and a restarted
controller rely on: the attempt's row (billed span, cost, info), the job's step, the planner's
market bookkeeping, the runtime's last events, and then the `attempt_<result>` event. What the job
does next (complete, fail, stop) stays the loop's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spotfit.controller.attempts import AttemptPlanner
from spotfit.controller.job_files import JobFiles
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord
from spotfit.state.states import AttemptState


class EndRecorder:
    """Writes the end of one job's attempts into the state DB."""

    def __init__(self, db: StateDB, job_id: str, plan: AttemptPlanner, files: JobFiles, ingest: Callable[[], None]):
        self.db = db
        self.job_id = job_id
        self.plan = plan
        self.files = files
        self.ingest = ingest  # the runtime's events and progress, read once more before the end's event

    def record(self, attempt: AttemptRecord, result: str, code: int | None, why: str, failure: str | None,
               market_stop: bool) -> None:
        """Bill attempt `attempt` up to now and record that it ended as `result` (`why`, `failure`)."""
        number = attempt["number"]
        progress = self.files.progress(number)
        end_step = progress.get("step", attempt.get("start_step") or 0)
        end_s = self.plan.now_s()  # one reading: the span billed is the span recorded
        billed_s, cost = self.plan.bill(attempt, end_s)
        info = {**(attempt.get("info") or {}),  # what the launch recorded (its decision), then the end's
                "timings": progress.get("timings", {}), "time_scale": self.plan.time_scale(),
                "on_demand_usd_per_h": self.plan.on_demand_usd_per_h(), "gpu": progress.get("gpu"),
                "overhead_s": self.plan.billed_overhead_s(attempt, end_s),
                "price_source": self.plan.price_source(attempt), **({"failure": failure} if failure else {})}
        self.db.update_attempt(self.job_id, number, state=result, ended_at=time.time(), exit_code=code,
                               end_step=end_step, trace_end_s=end_s, billed_s=billed_s,
                               cost_usd=cost, info=info)
        if "step" in progress:  # the next attempt starts from here, though the last look was earlier
            self.db.set_step(self.job_id, end_step)
        self.plan.attempt_ended(market_stop=market_stop,
                                preempted_in=attempt["zone"] if result == AttemptState.PREEMPTED else None)
        self.ingest()
        message = f"attempt {number} {result}" + (f" ({why})" if why else "") + f" at step {end_step}"
        if code not in (None, 0):
            message += f", exit {code}"
        self.db.add_event(self.job_id, f"attempt_{result}", message, attempt=number, failure=failure)
