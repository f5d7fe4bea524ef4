"""The controller loop: the one place that launches, watches, signals, sleeps and writes state.

Each pass (every `poll_s` wall seconds) it reads the attempt's progress and events from the
store, delivers preemptions (the replayed market's, and the injected ones of the spec), asks
the policy what to run at each new trace tick, launches or stops attempts, and records every
attempt's end and cost in the state DB. Decisions themselves are pure (the policy, `classify`,
the replay's prices); this module only carries them out.
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable

from spotfit.backends.base import Backend, LaunchRequest, make_backend
from spotfit.controller import outcome
from spotfit.controller.attempts import AttemptPlanner
from spotfit.errors import NoCapacityError, NotFoundError, SpotfitError
from spotfit.spec import JobSpec
from spotfit.state import StateDB
from spotfit.stores import open_store

TERMINAL = ("completed", "failed", "cancelled", "stopped")
CONTROLLER_STALE_S = 10.0


class Controller:
    """Drives one job to a terminal state."""

    def __init__(self, db: StateDB, job_id: str, backend: Backend | None = None,
                 poll_s: float = 0.1, on_update: Callable[[], None] | None = None):
        self.db = db
        self.job_id = job_id
        job = db.get_job(job_id)
        self.spec = JobSpec.model_validate(json.loads(job["spec_json"]))
        self.job_url = job["store_url"]
        self.store = open_store(self.job_url)
        self.backend = backend or make_backend(self.spec.backend)
        self.poll_s = poll_s
        self.on_update = on_update or (lambda: None)
        self.plan = AttemptPlanner(self.spec, db, job_id)
        self._seen_events: set[str] = {
            e["data"].get("key") for e in db.events(job_id) if e["data"].get("key")
        }
        self._failures = sum(1 for a in db.attempts(job_id) if a["state"] == outcome.FAILED)
        self._notified: set[int] = set()
        self._switching: set[int] = set()

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> str:
        """Run until the job is completed, failed, cancelled or stopped; return that state."""
        if not self.db.claim_controller(self.job_id, os.getpid(), CONTROLLER_STALE_S):
            raise SpotfitError(
                f"Job {self.job_id} already has a live controller.",
                hint=f"Watch it with `spotfit status {self.job_id}`.",
            )
        self.plan.start_clock()
        self._adopt()
        while True:
            job = self.db.get_job(self.job_id)
            if job["state"] in TERMINAL:
                return job["state"]
            self.db.update_job(self.job_id, controller_pid=os.getpid(), controller_seen_at=time.time(),
                               trace_now_s=self.plan.now_s())
            self._ingest()
            current = self._current()
            if job["cancel_requested"]:
                self._cancel(current)
            elif current is not None:
                self._watch(current)
            else:
                self._decide_and_launch()
            self.on_update()
            time.sleep(self.poll_s)

    def _current(self) -> dict | None:
        running = [a for a in self.db.attempts(self.job_id) if a["state"] in ("launching", "running")]
        return running[-1] if running else None

    def _adopt(self) -> None:
        """After a controller restart: keep watching a live attempt, or close the dead one."""
        current = self._current()
        if current is None:
            return
        if current["handle"] is None:
            self._finish(current, outcome.KILLED, None, "its launch was interrupted")
        else:
            self.db.add_event(self.job_id, "adopted", f"controller {os.getpid()} adopted attempt {current['number']}",
                              attempt=current["number"])

    # -- watching a running attempt -------------------------------------------------------------

    def _watch(self, attempt: dict) -> None:
        status = self.backend.status(attempt["handle"])
        number = attempt["number"]
        if not status.running:
            code = status.exit_code
            if code is None and status.signal is None:
                code = self._recorded_exit(number)
            result = outcome.classify(code, status.signal)
            if number in self._switching and result in (outcome.STOPPED, outcome.PREEMPTED, outcome.KILLED):
                result = outcome.STOPPED
            self._finish(attempt, result, code)
            return
        progress = self._progress(number)
        # Injected preemptions: the runtime holds at the step; deliver the signal now.
        for inj in self.plan.pending_injections():
            if progress.get("phase") == "holding" and (progress.get("step") or 0) >= inj.at_step:
                self.plan.mark_injected(inj, number)
                self.backend.preempt(attempt["handle"], inj.notice_s)
        # The replayed market: the zone's spot capacity is gone.
        if (attempt["market"] == "spot" and number not in self._notified
                and not self.plan.spot_available(attempt["zone"])):
            self._notified.add(number)
            self.db.add_event(self.job_id, "preemption_notice",
                              f"spot capacity in {attempt['zone']} reclaimed (trace)", attempt=number,
                              trace_s=self.plan.now_s())
            self.backend.preempt(attempt["handle"], self.plan.notice_s())
            return
        if number not in self._notified and number not in self._switching and self.plan.new_tick():
            decision = self.plan.decide(attempt, progress)
            if decision is not None and not self.plan.same_mode(attempt, decision):
                self._switching.add(number)
                self.db.add_event(self.job_id, "switch", f"policy switches to {decision}", attempt=number)
                self.backend.preempt(attempt["handle"], self.plan.notice_s())

    def _finish(self, attempt: dict, result: str, code: int | None, why: str = "") -> None:
        number = attempt["number"]
        progress = self._progress(number)
        end_step = progress.get("step", attempt.get("start_step") or 0)
        billed_s, cost = self.plan.bill(attempt)
        info = {"timings": progress.get("timings", {}), "time_scale": self.plan.time_scale(),
                "on_demand_usd_per_h": self.plan.on_demand_usd_per_h()}
        self.db.update_attempt(self.job_id, number, state=result, ended_at=time.time(), exit_code=code,
                               end_step=end_step, trace_end_s=self.plan.now_s(), billed_s=billed_s,
                               cost_usd=cost, info=info)
        self._ingest()
        message = f"attempt {number} {result}" + (f" ({why})" if why else "") + f" at step {end_step}"
        if code not in (None, 0):
            message += f", exit {code}"
        self.db.add_event(self.job_id, f"attempt_{result}", message, attempt=number)
        if result == outcome.COMPLETED:
            self._complete()
        elif result == outcome.FAILED:
            self._failures += 1
            if self._failures > self.spec.max_failures:
                self.db.update_job(self.job_id, state="failed",
                                   message=f"the script failed {self._failures} times; see `spotfit logs {self.job_id}`")
        elif result == outcome.STOPPED and self.db.get_job(self.job_id)["cancel_requested"]:
            self.db.update_job(self.job_id, state="cancelled", message="cancelled by the user")

    def _complete(self) -> None:
        try:
            result = json.loads(self.store.read_bytes("result.json"))
        except NotFoundError:
            result = {}
        self.db.update_job(self.job_id, state="completed", result_json=json.dumps(result),
                           step=result.get("step") or self.db.get_job(self.job_id)["step"],
                           message="completed")

    # -- launching ------------------------------------------------------------------------------

    def _decide_and_launch(self) -> None:
        decision = self.plan.decide(None, {})
        if decision is None:
            self.db.update_job(self.job_id, state="waiting", message=self.plan.waiting_reason())
            return
        market, zone = decision
        number = self.db.add_attempt(self.job_id, backend=self.backend.name, zone=zone, market=market,
                                     state="launching", trace_start_s=self.plan.now_s(),
                                     start_step=self.db.get_job(self.job_id)["step"])
        self.store.write_bytes(f"attempts/{number:04d}/runtime.json",
                               self.plan.runtime_config(self.job_url, number, zone).to_json().encode())
        request = LaunchRequest(job_id=self.job_id, attempt=number, job_url=self.job_url, zone=zone,
                                market=market, workers=self.spec.resources.workers,
                                env=dict(self.spec.env))
        try:
            if market == "spot" and not self.plan.spot_available(zone):
                raise NoCapacityError(f"no spot capacity in {zone} at trace second {self.plan.now_s():.0f}")
            handle = self.backend.launch(request)
        except NoCapacityError as exc:
            self.db.update_attempt(self.job_id, number, state="no_capacity", ended_at=time.time(),
                                   trace_end_s=self.plan.now_s(), billed_s=0.0, cost_usd=0.0)
            self.db.add_event(self.job_id, "no_capacity", f"attempt {number}: {exc}", attempt=number)
            return
        self.db.update_attempt(self.job_id, number, handle=handle, state="running")
        self.db.update_job(self.job_id, state="running", message=f"attempt {number} on {market} {zone or ''}".strip())
        self.db.add_event(self.job_id, "launch", f"attempt {number}: {market} in {zone or 'local'}",
                          attempt=number, trace_s=self.plan.now_s())

    def _cancel(self, current: dict | None) -> None:
        if current is None:
            self.db.update_job(self.job_id, state="cancelled", message="cancelled by the user")
            return
        if current["number"] not in self._switching:
            self._switching.add(current["number"])
            self.db.add_event(self.job_id, "cancel", "cancel requested: saving and stopping",
                              attempt=current["number"])
            self.backend.preempt(current["handle"], notice_s=30.0)
        self._watch(current)

    # -- reading the store ----------------------------------------------------------------------

    def _progress(self, attempt: int) -> dict:
        try:
            doc = json.loads(self.store.read_bytes("progress.json"))
        except (NotFoundError, ValueError):
            return {}
        return doc if doc.get("attempt") == attempt else {}

    def _recorded_exit(self, attempt: int) -> int | None:
        try:
            return json.loads(self.store.read_bytes(f"attempts/{attempt:04d}/exit.json"))["code"]
        except (NotFoundError, ValueError, KeyError):
            return None

    def _ingest(self) -> None:
        """Copy new runtime events into the DB and the latest progress into the job row."""
        for key in self.store.list("events"):
            if key in self._seen_events:
                continue
            try:
                doc = json.loads(self.store.read_bytes(key))
            except (NotFoundError, ValueError):
                continue
            self._seen_events.add(key)
            self.db.add_event(self.job_id, doc["kind"], doc["message"], attempt=doc.get("attempt"),
                              key=key, **doc.get("data", {}))
            if doc["kind"] == "restored":
                self.db.update_attempt(self.job_id, doc["attempt"], start_step=doc["data"]["step"])
        current = self._current()
        if current is not None:
            progress = self._progress(current["number"])
            if progress:
                self.plan.observe(progress)
                self.db.update_job(self.job_id, step=progress.get("step") or 0,
                                   total_steps=progress.get("total_steps"), loss=progress.get("loss"))
