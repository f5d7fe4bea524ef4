"""The controller loop: the one place that launches, watches, signals, sleeps and writes state.

Each pass (every `poll_s` wall seconds) renews the job's lease, reads the attempt's progress and
events from the store, delivers preemptions (the replay's and the spec's injected ones), asks the
policy what to run at each new trace tick, launches or stops attempts, and records each attempt's
end and cost. Decisions are pure (policy, `classify`, prices); this module carries them out.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable
from typing import Any, cast

from spotfit.attempt import layout
from spotfit.attempt.progress import Phase
from spotfit.attempt.result import Result
from spotfit.backends.base import Backend, Handle, make_backend
from spotfit.controller import budget, classify, cost_doc, job_secrets, notify, outcome, shipped_code
from spotfit.controller.attempt_end import EndRecorder
from spotfit.controller.attempt_watch import AttemptWatches
from spotfit.controller.attempts import AttemptPlanner
from spotfit.controller.failures import FailureTracker, describe
from spotfit.controller.ingest import Ingest, live_attempt
from spotfit.controller.job_files import JobFiles
from spotfit.controller.launch import Launcher
from spotfit.controller.market_watch import MarketWatch
from spotfit.controller.notifications import Notifier
from spotfit.controller.rule_actions import RuleActions
from spotfit.controller.state_change import StateChange
from spotfit.controller.store_guard import StoreGuard
from spotfit.controller.watchdog import Watchdog
from spotfit.errors import UsageError
from spotfit.host import confine
from spotfit.host.home import export_scratch, state_is_shared
from spotfit.spec.job import spec_of
from spotfit.state import lease
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord, handle_text
from spotfit.state.states import AttemptState, JobState, Market, StopRequest
from spotfit.stores import open_store

RESULT_WAIT_S = 600.0  # how long a completed job waits for its result.json while the store is away
STOP_GRACE_S = 30.0  # a stop request not honoured by then becomes a SIGTERM


# The signals `spotfit run` takes as Ctrl-C (sdk.run_job), by the name its events give them.
INTERRUPTS = {int(signal.SIGINT): "Ctrl-C", int(signal.SIGTERM): "SIGTERM", int(signal.SIGHUP): "SIGHUP"}


class Controller:
    """Drives one job to a terminal state."""

    def __init__(self, db: StateDB, job_id: str, backend: Backend[Any] | None = None,
                 poll_s: float = 0.1, on_update: Callable[[], None] | None = None, for_others: bool = False):
        self.db = db
        if db.memory is None:  # a full disk under the home never stops its supervision (one per connection)
            db.supervise_from_memory()
        self.job_id = job_id
        job = db.get_job(job_id)
        self.job_url = job["store_url"]
        self.store = open_store(self.job_url)
        self.spec = shipped_code.localize(spec_of(job), self.store, job_id)
        self.guard = StoreGuard(self.job_url, lambda kind, message: db.add_event(job_id, kind, message))
        self.files = JobFiles(self.store, self.guard)
        self.backend = backend or make_backend(self.spec.backend)
        self.poll_s = poll_s
        self.holder, self.lease_s = lease.this_process(), lease.ttl_s()  # the one controller of the job
        self.on_update = on_update or (lambda: None)
        try:
            # Where the job may write on this host (host/confine.py): a shared controller, or a shared
            # state's job, keeps to what its owner opened to every submitter (the row may never have
            # passed `validate`). A job on its owner's private state passed the owner's check at submit.
            if for_others or state_is_shared():
                confine.check(self.spec, confine.shared_roots(), f"job {job_id}", job_url=self.job_url)
            classify.preflight(self.spec)
            self.plan = AttemptPlanner(self.spec, db, job_id)
        except UsageError as exc:
            raise self._config_failed(classify.as_config_error(exc)) from exc
        self._config_error: classify.ConfigError | None = None  # set when the runtime reports one
        self.ingest = Ingest(db, job_id, self.files, self.plan)  # the runtime's events and progress, into the DB
        self.failures = FailureTracker(db, job_id, self.spec, progress_of=self.files.progress)
        self.ends = EndRecorder(db, job_id, self.plan, self.files, self.ingest)  # an attempt's bill, info, event
        self.watches = AttemptWatches()  # what was seen and done to each attempt (notices, stops, switches)
        # Rules that already paused or stopped this job do not fire again when it resumes.
        fired = {e["data"]["index"] for e in db.events(job_id)
                 if e["kind"] == "rule" and e["data"].get("rule") != "price_cap"}
        self.watchdog = Watchdog(budget.rules_of(self.spec), fired)
        self.webhook = notify.webhook_for(db, job_id, self.spec.notify)
        self.notifier = Notifier(db, job_id, [*notify.sinks(), *(self.spec.notify.sinks if self.spec.notify else [])])
        self.rules = RuleActions(db=db, job_id=job_id, spec=self.spec, files=self.files, backend=self.backend,
                                 plan=self.plan, watchdog=self.watchdog, webhook=self.webhook, watches=self.watches)
        self.market_watch = MarketWatch(db, job_id, self.plan, self.watches)
        self.launcher = Launcher(db=db, job_id=job_id, job_url=self.job_url, spec=self.spec, files=self.files,
                                 backend=self.backend, plan=self.plan, failures=self.failures, watchdog=self.watchdog)
        self.interrupted = False  # set by Ctrl-C (sdk.run_job): the next pass stops the job with a checkpoint
        self.interrupt_signal = int(signal.SIGINT)  # the signal that did it (`spotfit run` exits 128 + it)
        if (live := self.plan.connect_live(self.backend, self.launcher.request(0, Market.SPOT, None))) is not None:
            db.add_event(job_id, "market", live)

    # -- the loop -----------------------------------------------------------------------------

    @property
    def interrupted_by(self) -> str:
        """How the job was interrupted, as its events say it: Ctrl-C, SIGTERM, SIGHUP."""
        return INTERRUPTS.get(self.interrupt_signal, f"signal {self.interrupt_signal}")

    def run(self) -> str:
        """Run until the job is completed, failed, cancelled or stopped; return that state."""
        self.claim()
        try:
            self.begin()
            while (state := self.step()) is None:
                time.sleep(self.poll_s)
            return state
        finally:
            self.end()

    # One job's loop in three parts, so that one process can drive many jobs (`controller/pool.py`):
    # `claim` then `begin` once, `step` once a pass until it returns the job's state, `end` always.

    def claim(self) -> None:
        """Take the job's lease (`LeaseTaken` when a live controller holds it)."""
        if not self.db.claim_lease(self.job_id, self.holder, self.lease_s):
            raise lease.LeaseTaken.of(self.job_id)

    def begin(self) -> None:
        """Start the job's clock, adopt its live attempt, and take a paused job back."""
        self.plan.start_clock()
        self._adopt()
        if self.db.get_job(self.job_id)["state"] == JobState.PAUSED:
            self.db.move_job(self.job_id, JobState.WAITING, "resumed")
            self.db.add_event(self.job_id, "resumed", "paused job resumed")

    def end(self) -> None:
        """A controller that stops for any reason frees the job at once (if it still holds it)."""
        self.db.release_lease(self.job_id, self.holder)
        self.db.flush()  # what it kept in memory on a full disk lands before it ends
        self._record_state_waits()
        if self.notifier.sinks:  # the deliveries under way get a last, bounded wait
            self.notifier.close(self.db.get_job(self.job_id))

    def step(self) -> str | None:
        """One pass of the loop: the job's state once it is over (or paused for good), else None."""
        job = self.db.get_job(self.job_id)
        self.notifier.poll(job)
        state = JobState(job["state"])
        if state.is_terminal():
            job_secrets.release(self.backend, self.db, self.job_id, self.spec, state)
            shutil.rmtree(export_scratch(self.job_id), ignore_errors=True)  # what a dead export left here
            cost_doc.keep_ended(self.db, self.job_id)
            if self._config_error is not None:
                raise self._config_error
            return state
        if state is JobState.PAUSED and not self.rules.price_paused:  # no controller until `spotfit resume JOB`
            return state
        self.db.renew_lease(self.job_id, self.holder, self.lease_s, trace_now_s=self.plan.now_s())
        self._record_state_waits()
        self.ingest()
        current = self._current()
        if self.interrupted and not job["cancel_requested"]:
            job["cancel_requested"] = StopRequest.INTERRUPT
            self.db.request_stop(self.job_id, StopRequest.INTERRUPT)
        if job["cancel_requested"]:
            self._cancel(current, StopRequest(job["cancel_requested"]))
        elif current is not None:
            self._watch(current)
        elif self.rules.price_paused:
            self.apply(self.rules.resume_below_cap())
        else:
            self._decide_and_launch()
        self.on_update()
        return None

    def _record_state_waits(self) -> None:
        """Writes that waited out a locked or full state DB (`state/wait.py`): one `state_wait` event each."""
        while self.db.waits:
            wait = self.db.waits.pop(0)
            self.db.add_event(self.job_id, "state_wait", wait.message(self.db.path), reason=wait.reason,
                              waited_s=round(wait.waited_s, 1), tries=wait.tries, write=wait.what)

    def _current(self) -> AttemptRecord | None:
        return live_attempt(self.db, self.job_id)

    def _adopt(self) -> None:
        """After a controller restart: keep watching the live attempt, or close the one that is over.

        An attempt without a handle was being launched when the last controller died: the backend
        looks for what the launch started (processes, instances) and adopts it; else an exit record
        in the store means it ran and ended meanwhile; only with neither was the attempt killed.
        """
        current = self._current()
        if current is None:
            return
        number = current["number"]
        how = ""
        if current["handle"] is None:
            handle = self.backend.find(self.launcher.request(number, Market(current["market"]), current["zone"]))
            if handle is None:
                code = self.files.recorded_exit(number)
                if code is None:
                    self._finish(current, outcome.KILLED, None, "its launch was interrupted and nothing it "
                                                                "started was found", unasked=False)
                else:
                    self._finish(current, outcome.classify(code), code, "it ended while no controller watched")
                return
            self.db.update_attempt(self.job_id, number, handle=handle.to_json(), state=AttemptState.RUNNING)
            self.db.move_job(self.job_id, JobState.RUNNING, f"attempt {number} adopted")
            how = f", found by the {self.backend.name} backend after an interrupted launch"
        self.watches[number].catch_up = True
        self.db.add_event(self.job_id, "adopted", f"controller {self.holder.host}/{os.getpid()} adopted attempt "
                          f"{number}{how}", attempt=number)

    # -- watching a running attempt -------------------------------------------------------------

    def _watch(self, attempt: AttemptRecord) -> None:
        self.rules.cap_at_budget(attempt)
        self.apply(self.rules.pause_on_full_store(attempt))  # none while an attempt runs: it is asked to stop
        handle = self._handle(attempt)
        status = self.backend.status(handle)
        number = attempt["number"]
        watch = self.watches[number]
        if not status.running:
            code = status.exit_code
            if code is None and status.signal is None:
                code = self.files.recorded_exit(number)
            result = outcome.classify(code, status.signal, status.disrupted)
            if watch.switching and result != outcome.COMPLETED:
                # Asked to stop (a switch, a rule, a cancel): however it ended, even failing when
                # the signal landed mid-import, it ended because of the request.
                result = outcome.STOPPED
            trained_last = (self.files.read_json(layout.RESULT) or {}).get("attempt") == number
            result = self.market_watch.ended(attempt, result, self.files.progress(number), trained_last)
            self.backend.stop(handle, grace_s=0.0)  # release what is left (other workers, groups)
            self._finish(attempt, result, code, signal=status.signal, failure=self.rules.store_failure(number, result))
            return
        if status.unscheduled and self.launcher.pending_overdue(attempt):
            self.backend.stop(handle, grace_s=0.0)
            self.launcher.no_capacity(number, attempt["zone"], f"no node took its pods within the pending timeout "
                                                               f"({self.launcher.pending_timeout_s():g}s)")
            return
        progress = self.files.progress(number)
        if self.failures.boot_overdue(attempt, progress, time.time()):
            self.backend.stop(handle, grace_s=0.0)
            self._finish(attempt, outcome.FAILED, None, failure="boot_timeout")
            return
        # Injected preemptions: the runtime holds at the step; deliver the signal now.
        for inj in self.plan.pending_injections():
            if progress.get("phase") == Phase.HOLDING and (progress.get("step") or 0) >= inj.at_step:
                self.plan.mark_injected(inj, number)
                self.backend.preempt(handle, inj.notice_s)
        # The replayed market, tick by tick: the zone's spot capacity is gone, or the policy switches.
        event = self.market_watch.event(attempt)
        if event is not None and event[0] == "preempted":
            self.market_watch.notice(attempt, event)
            self.backend.preempt(handle, self.plan.market_notice_s())
            return
        if self.rules.over_budget_limit(attempt, progress):
            self.backend.stop(handle, grace_s=0.0)
            return
        if not watch.switching and self.rules.team_budget_while_running(attempt, progress):
            return
        if watch.stop_sent is not None and time.time() - watch.stop_sent > STOP_GRACE_S:
            watch.stop_sent = None
            self.backend.preempt(handle, self.plan.notice_s())
        if event is not None:
            watch.switching = True
            self.market_watch.switch(attempt, event)
            self.backend.preempt(handle, self.plan.market_notice_s())
        if self.watchdog.active and not watch.switching:
            self.rules.apply(attempt, progress)

    def _finish(self, attempt: AttemptRecord, result: str, code: int | None, why: str = "", signal: int | None = None,
                failure: str | None = None, unasked: bool = True) -> None:
        number = attempt["number"]
        watch = self.watches[number]
        asked = not unasked or watch.asked_to_end()
        if failure is None and code != classify.EXIT_CONFIG:
            failure = self.failures.kind_of(number, result, code, signal, asked)
        why = why or describe(failure or "", self.failures.boot_timeout_s)
        self.ends.record(attempt, result, code, why, failure, market_stop=watch.notified or watch.market_stop)
        if code != classify.EXIT_CONFIG:
            self.apply(self.failures.ended(number, failure, time.time()))
        if result == outcome.COMPLETED:
            self._complete()
        elif result == outcome.FAILED and code == classify.EXIT_CONFIG:
            self._config_error = classify.runtime_config_error(self.db, self.job_id, number)
            self._config_failed(self._config_error)
        elif result == outcome.STOPPED and (request := self.db.get_job(self.job_id)["cancel_requested"]):
            state, why = StopRequest(request).ends_as()
            self.db.move_job(self.job_id, state, why)
        elif result == outcome.STOPPED and self.rules.halt is not None:
            state, why = self.rules.halt
            self.rules.halt = None
            self.db.move_job(self.job_id, state, why)

    def _config_failed(self, error: classify.ConfigError) -> classify.ConfigError:
        """Fail the job at once for a configuration error (no retry); returns the error to raise."""
        if not JobState(self.db.get_job(self.job_id)["state"]).is_terminal():
            line = f"configuration error: {error.message}" + (f" {error.hint}" if error.hint else "")
            self.db.move_job(self.job_id, JobState.FAILED, line)
            self.db.add_event(self.job_id, "config_error", error.message, hint=error.hint)
            job_secrets.release(self.backend, self.db, self.job_id, self.spec, JobState.FAILED)
        return error

    def _complete(self) -> None:
        result = self._read_result()
        self.db.move_job(self.job_id, JobState.COMPLETED, "completed", result=result,
                         step=result.get("step") or self.db.get_job(self.job_id)["step"])

    # -- launching ------------------------------------------------------------------------------

    def _decide_and_launch(self) -> None:
        if self._training_finished():  # its attempt ended before it was recorded completed (a crash)
            self.db.add_event(self.job_id, "finished", "training had ended (result.json): completing, nothing launched")
            self._complete()
            return
        if self.apply(self.rules.halt_before_launch()) or self.apply(self.rules.pause_on_full_store(None)):
            return
        if (wait_s := self.failures.backoff_left_s(time.time())) > 0:
            self.db.move_job(self.job_id, JobState.WAITING, self.failures.waiting_message(wait_s))
            return
        try:
            classify.check_script(self.spec, local=self.backend.runs_here)
        except classify.ConfigError as exc:  # gone since the job was submitted
            self._config_error = self._config_failed(exc)
            return
        decision = self.plan.decide_idle()
        if decision is None:
            self.db.move_job(self.job_id, JobState.WAITING, self.plan.waiting_reason())
            return
        self.apply(self.launcher.launch(decision))

    def apply(self, change: StateChange | None) -> bool:
        """Apply a part's outcome (`state_change.py`): move the job, then record the change's event.
        True when there was a change to apply (moved, or refused by the transitions and recorded so)."""
        if change is None:
            return False
        self.db.move_job(self.job_id, change.to, change.why)
        if change.event is not None:
            kind, message, data = change.event
            self.db.add_event(self.job_id, kind, message, **data)
        return True

    def _handle(self, attempt: AttemptRecord) -> Handle:
        return cast(Handle, self.backend.load_handle(handle_text(attempt)))

    def _cancel(self, current: AttemptRecord | None, request: StopRequest) -> None:
        """A cancel (or a sweep's prune): the attempt saves a checkpoint and stops."""
        if current is None:
            state, why = request.ends_as()
            self.db.move_job(self.job_id, state, why)
            return
        number = current["number"]
        if not self.watches[number].switching:
            if request is StopRequest.PRUNE:  # after the step in progress, like a rule's stop
                self.db.add_event(self.job_id, "pruned", "pruned by its sweep: saving and stopping",
                                  attempt=number, action="pruned")
                self.rules.request_stop(current, self.files.progress(number), "pruned by its sweep")
            else:
                self.watches[number].switching = True
                interrupted = request is StopRequest.INTERRUPT
                what = f"interrupted ({self.interrupted_by})" if interrupted else "cancel requested"
                self.db.add_event(self.job_id, "cancel", f"{what}: saving and stopping", attempt=number)
                self.backend.preempt(self._handle(current), notice_s=30.0)
        self._watch(current)

    def _training_finished(self) -> bool:
        """An attempt wrote the final result and no modeled work is left: nothing to launch.

        On the replay an attempt that ran ahead of its modeled instance may have trained the
        last step in an attempt the model ended earlier: the rest of the modeled work is still
        launched (and billed); that attempt trains nothing (runtime `already_done`).
        """
        if self.files.read_json(layout.RESULT) is None:
            return False
        return not self.plan.market.replayed or self.plan.work_left_s() <= 1e-6

    # -- reading the store ----------------------------------------------------------------------

    def _read_result(self) -> Result:
        """`result.json` of a completed attempt, waiting (with backoff) while the store is away."""
        doc = self.files.read_result(RESULT_WAIT_S, self.poll_s, keep_alive=lambda: self.db.renew_lease(
            self.job_id, self.holder, self.lease_s))
        if doc is None:
            self.db.add_event(self.job_id, "result_unread",
                              f"result.json could not be read for {RESULT_WAIT_S:g}s: the job completes without it")
        return doc or Result()
