"""How much of a job's work is done: steps seen, the modeled work per step, each attempt's training start.

`AttemptPlanner` holds one `WorkMeter`; it feeds the meter each progress report and asks it
the work the policy plans with (`work_s`, `work_done_s`) and the restart overhead.
"""

from __future__ import annotations

import time
from typing import Any

from spotfit.attempt.progress import Phase
from spotfit.spec.job import JobSpec
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord, JobRecord, trace_start_s
from spotfit.state.states import AttemptState


class WorkMeter:
    """The job's progress in steps and in modeled trace seconds of work."""

    def __init__(self, spec: JobSpec, db: StateDB, job_id: str):
        self.spec = spec
        self.db = db
        self.job_id = job_id
        self.trained: dict[int, dict[str, Any]] = {}  # attempt -> its "training" event (trace_s, overhead_s)
        self._rate: tuple[float, int] | None = None  # (wall time, step) of the first observation
        self._trace_s_per_step: float | None = None
        self.total_steps: int | None = None
        self.step = 0

    def load(self, job: JobRecord) -> None:
        """Go on from the job's row and its recorded training starts (a restarted controller)."""
        self.step = job["step"] or 0
        self.total_steps = job["total_steps"] or None
        self.trained = {e["attempt"]: e["data"] for e in self.db.events(self.job_id)
                        if e["kind"] == "training" and e["attempt"] is not None}

    def observe(self, progress: dict[str, Any]) -> bool:
        """Take a progress report; True when it says the attempt trains."""
        step = progress.get("step") or 0
        self.step = max(self.step, step)
        self.total_steps = progress.get("total_steps") or self.total_steps
        if progress.get("phase") != Phase.TRAINING:
            return False
        if not step:
            return True
        now = time.time()
        if self._rate is None or step < self._rate[1]:
            self._rate = (now, step)
        elif step - self._rate[1] >= 20 and now > self._rate[0]:
            steps_per_wall_s = (step - self._rate[1]) / (now - self._rate[0])
            self._trace_s_per_step = self.spec.market.time_scale / steps_per_wall_s
        return True

    def record_training(self, attempt: AttemptRecord, step: int, train_s: float) -> bool:
        """The attempt's first training report (True): a `training` event says when it trains from."""
        number = attempt["number"]
        if number in self.trained:
            return False
        self.trained[number] = {"trace_s": train_s, "overhead_s": self.model_overhead_s()}
        self.db.add_event(self.job_id, "training",
                          f"attempt {number} trains from step {step}, "
                          f"{self.model_overhead_s():.0f} trace s after its launch (restart overhead)",
                          attempt=number, **self.trained[number])
        return True

    def per_step(self) -> float | None:
        """Trace seconds per step on the modeled instance, when the spec gives the work (else None)."""
        if self.spec.work_h and self.total_steps:
            return self.spec.work_h * 3600.0 / self.total_steps
        return None

    def model_overhead_s(self) -> float:
        return self.spec.market.overhead_h * 3600.0

    def overhead_s(self) -> float:
        """The restart overhead the policy plans with: the job's measured mean once it has one.

        Measured = trace seconds from a launch to its first training step after restore. On the
        replay the clock holds through the local start-up, so it equals `market.overhead_h`; on a
        backend whose clock is real time it is the real start-up.
        """
        measured = [d["overhead_s"] for d in self.trained.values() if d.get("overhead_s") is not None]
        return sum(measured) / len(measured) if measured else self.model_overhead_s()

    def base_work_s(self, number: int) -> float:
        """Modeled work done when attempt `number` starts training: the previous attempts' (trace s).

        Work is kept at a stop (the runtime saves at the notice); a restore from an older
        checkpoint loses the steps after it. Steps that an attempt made after its stop was due
        count in the next attempt's span, so the modeled finish does not depend on wall timing.
        """
        per_step = self.per_step() or 0.0
        work = 0.0
        for a in self.db.attempts(self.job_id):
            if a["state"] == AttemptState.NO_CAPACITY:
                continue
            work = min(work, (a["start_step"] or 0) * per_step)
            if a["number"] == number:
                return work
            if a["trace_end_s"] is not None:
                work += max(0.0, a["trace_end_s"] - (a["trace_start_s"] or 0.0) - self.model_overhead_s())
        return work  # after every attempt (`number` is the next one)

    def work_s(self) -> float:
        if self.spec.work_h:
            return self.spec.work_h * 3600.0
        if self._trace_s_per_step and self.total_steps:
            return self._trace_s_per_step * self.total_steps
        return (self.spec.deadline_h * 3600.0 / 2) if self.spec.deadline_h else 3600.0

    def work_done_s(self, attempt: AttemptRecord | None, at_s: float, work_s: float) -> float:
        if not self.per_step():
            return work_s * self.step / self.total_steps if self.total_steps else 0.0
        if attempt is None:
            return self.base_work_s(-1)
        base = self.base_work_s(attempt["number"])
        if attempt["number"] not in self.trained:
            return base
        return base + max(0.0, at_s - trace_start_s(attempt) - self.model_overhead_s())
