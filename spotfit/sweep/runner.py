"""The sweep controller: asks Optuna for trials, runs each as a job, prunes, promotes, records.

Each pass it reads every open trial's job (state, and the `epoch_end` events its runtime
reported), reports the objective to the study, carries out the pruner's verdicts (a pruned or
paused trial's job stops on a checkpoint: `StopRequest.PRUNE`), closes the trials whose jobs
ended, then fills the free slots: a paused trial that ASHA now promotes first (its job resumes
from the checkpoint it stopped on), else a new trial. Trial jobs run under their own detached
controllers, so the sweep controller may die at any moment: `resume` reconciles the study, the
trial rows and the jobs (a trial asked but not recorded, recorded without a job, a job without a
controller) and goes on, never starting a trial's job twice.

One sweep controller drives a sweep: it holds the sweep's lease (`spotfit/state/lease.py`, as a job's
controller holds the job's), renews it every pass, and stops as soon as another holds it. A
controller that dies stops renewing; on its own host its dead pid frees the lease at once.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spotfit import sdk
from spotfit.attempt.result import job_result
from spotfit.errors import NotFoundError, UsageError
from spotfit.spec.job import JobSpec
from spotfit.state import lease
from spotfit.state.records import JobRecord
from spotfit.state.states import JobState, StopRequest
from spotfit.sweep import asha, publish, report, study, trials
from spotfit.sweep.spec import SweepSpec
from spotfit.sweep.store import SweepDB, sweeps_target

if TYPE_CHECKING:
    from spotfit.state.db import StateDB

ACTIVE = ("creating", "running", "pausing", "pruning")  # trial states that hold a slot
FINAL = ("completed", "pruned", "failed", "cancelled")


def db() -> SweepDB:
    """The sweep DB, where the job state is (`store.sweeps_target`)."""
    return SweepDB(sweeps_target())


def controller_alive(sweep: dict[str, Any], sweeps: SweepDB | None = None) -> bool:
    """Whether a sweep controller holds the sweep's lease now (on this host: its process is alive)."""
    return (sweeps or db()).lease_live(sweep)


class SweepRunner:
    """Drives one sweep to its end."""

    def __init__(self, sweep_id: str, poll_s: float = 0.2, on_update: Callable[[], None] | None = None):
        self.db = db()
        self.sweep_id = sweep_id
        row = self.db.get_sweep(sweep_id)
        self.spec = SweepSpec.model_validate(json.loads(row["spec_json"]))
        options = json.loads(row["options_json"])  # the base job as validated, `--preempt-at` for one trial
        self.base = JobSpec.model_validate(options["base"])
        self.study = study.load(sweep_id, self.spec)
        self.jobs = sdk.db()
        self.holder = lease.this_process()
        self.ttl_s = lease.ttl_s()
        self.poll_s = poll_s
        self.on_update = on_update or (lambda: None)
        self.preempt = (options["preempt_trial"], options["preempt_at"]) if options.get("preempt_at") else None
        self.total = min(self.spec.trials, study.grid_size(self.spec) or self.spec.trials)

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> str:
        if not self.db.claim_lease("sweeps", self.sweep_id, self.holder, self.ttl_s):
            raise UsageError(f"Sweep {self.sweep_id} already has a live controller "
                             f"({self.db.get_sweep(self.sweep_id)['lease_owner']}: host/pid/token).",
                             hint=f"Watch it with `spotfit sweep status {self.sweep_id}`.")
        try:
            return self._drive()
        finally:
            self.db.release_lease("sweeps", self.sweep_id, self.holder)

    def _drive(self) -> str:
        self._reconcile()
        while True:
            sweep = self.db.get_sweep(self.sweep_id)
            if sweep["state"] != "running":
                return str(sweep["state"])
            self.db.renew_lease("sweeps", self.sweep_id, self.holder, self.ttl_s)  # LeaseLost: another drives it
            self._observe()
            if sweep["cancel_requested"]:
                self.stop_all("cancelled", "cancelled by the user")
            elif self.spec.budget_usd is not None and self.spent_usd() >= self.spec.budget_usd:
                self.stop_all("stopped", f"the sweep's budget ${self.spec.budget_usd:g} is spent")
            else:
                self._fill_slots()
            self.on_update()
            time.sleep(self.poll_s)

    def _reconcile(self) -> None:
        """After a crash: every asked trial has a row, every row a job, every open job a controller."""
        known = {t["number"] for t in self.db.trials(self.sweep_id)}
        for number, params in study.open_trials(self.study).items():
            if number not in known:
                self.db.add_trial(self.sweep_id, number, params)
        for trial in self.db.trials(self.sweep_id):
            if trial["state"] == "creating":
                self._start_job(trial["number"], trial["params"])
            elif trial["state"] not in FINAL and trial["job_id"]:
                job = self.jobs.get_job(trial["job_id"])
                if not JobState(job["state"]).is_terminal() and not sdk.controller_alive(job):
                    sdk.start_detached(job["id"])

    # -- trials ---------------------------------------------------------------------------------

    def _new_trial(self) -> None:
        number, params = study.ask(self.study, self.spec)
        self.db.add_trial(self.sweep_id, number, params)
        self._start_job(number, params)

    def _start_job(self, number: int, params: dict[str, Any]) -> None:
        """Submit and start trial `number`'s job, or link the job a dead controller had submitted."""
        name = trials.job_name(self.sweep_id, number)
        try:
            job_id = self.jobs.find_job(name)["id"]
        except NotFoundError:
            left = None if self.spec.budget_usd is None else max(self.spec.budget_usd - self.spent_usd(), 1e-6)
            spec = trials.trial_spec(self.base, self.sweep_id, number, params, self.spec.pass_as,
                                     self.spec.deadline_h, left)
            preempt = self.preempt[1] if self.preempt and self.preempt[0] == number else None
            job_id = sdk.submit_spec(spec, preempt_at=preempt)
        self.db.update_trial(self.sweep_id, number, job_id=job_id, state="running")
        job = self.jobs.get_job(job_id)
        if not JobState(job["state"]).is_terminal() and not sdk.controller_alive(job):
            sdk.start_detached(job_id)

    def _fill_slots(self) -> None:
        while True:
            open_trials = self.db.trials(self.sweep_id)
            if sum(t["state"] in ACTIVE for t in open_trials) >= self.spec.parallel:
                return
            # The rungs are final once no trial can reach them: no new trial, none running.
            final = len(open_trials) >= self.total and not any(t["state"] in ACTIVE for t in open_trials)
            paused = self._promotable(open_trials, final)
            if paused is not None:
                self._promote(paused)
            elif len(open_trials) < self.total:
                self._new_trial()
            else:
                if final and not any(t["state"] == "paused" and t["job_id"] and sdk.controller_alive(
                        self.jobs.get_job(t["job_id"])) for t in open_trials):
                    # A paused trial skipped above while its controller was exiting may have exited since:
                    # look again before pruning the rest, or the sweep would end with no trial finished.
                    paused = self._promotable(open_trials, final)
                    if paused is not None:
                        self._promote(paused)
                        continue
                    self._finish(open_trials)
                return

    def _promotable(self, rows: list[dict[str, Any]], final: bool) -> dict[str, Any] | None:
        """The paused trial ASHA promotes now (the highest rung first), if any."""
        for trial in sorted((t for t in rows if t["state"] == "paused"), key=lambda t: -t["rung"]):
            if sdk.controller_alive(self.jobs.get_job(trial["job_id"])):
                continue  # its controller is still exiting: promote it on a later pass
            values = self._rung_values(trial["rung"])
            if asha.promotable(values, trial["number"], self.spec.objective.mode, final):
                return trial
        return None

    def _rung_values(self, rung: int) -> dict[int, float]:
        return {t.number: t.intermediate_values[rung] for t in self.study.get_trials(deepcopy=False)
                if rung in t.intermediate_values}

    def _promote(self, trial: dict[str, Any]) -> None:
        # The job resumes first: a crash after it leaves a paused row over a live job, read as promoted.
        sdk.resume(trial["job_id"], detach=True)
        self.db.update_trial(self.sweep_id, trial["number"], state="running", promotions=trial["promotions"] + 1)
        self.jobs.add_event(trial["job_id"], "promoted", f"promoted by ASHA at epoch {trial['rung']}: resumes "
                            "from its checkpoint")

    def _finish(self, rows: list[dict[str, Any]]) -> None:
        """Nothing left to run: trials still paused are pruned; the sweep is complete."""
        for trial in rows:
            if trial["state"] == "paused":
                study.tell(self.study, trial["number"], "pruned")
                self.db.update_trial(self.sweep_id, trial["number"], state="pruned")
        message = f"{len(rows)} trials done"
        best = report.best_trial(self.db.trials(self.sweep_id), self.spec.objective.mode)
        if best is not None and self.base.export is not None:
            card = publish.publish_best(self.base.name, self.jobs.get_job(best["job_id"]), {
                "id": self.sweep_id, "trial": best["number"], "params": best["params"],
                "objective": {**self.spec.objective.model_dump(), "value": best["value"]}})
            if card is not None:
                message += f"; best trial {best['number']} published as {card['name']} version {card['version']}"
        self.db.update_sweep(self.sweep_id, state="completed", message=message)

    # -- observing jobs -------------------------------------------------------------------------

    def _observe(self) -> None:
        for trial in self.db.trials(self.sweep_id):
            if trial["state"] in FINAL or not trial["job_id"]:
                continue
            job = self.jobs.get_job(trial["job_id"])
            if trial["state"] == "paused":
                if not JobState(job["state"]).is_terminal():  # promoted just before a crash
                    self.db.update_trial(self.sweep_id, trial["number"], state="running")
                continue
            self._read_epochs(trial)
            if JobState(job["state"]).is_terminal():
                self._closed(self.db_trial(trial["number"]), job)

    def db_trial(self, number: int) -> dict[str, Any]:
        return next(t for t in self.db.trials(self.sweep_id) if t["number"] == number)

    def _read_epochs(self, trial: dict[str, Any]) -> None:
        """Report each new epoch's objective; prune or pause on the pruner's verdict."""
        events = self.jobs.events(trial["job_id"], trial["events_seen"])
        if not events:
            return
        for event in events:
            if event["kind"] == "epoch_end":
                self._epoch(trial["number"], trial["job_id"], int(event["data"]["epoch"]),
                            event["data"].get("metrics") or {})
        self.db.update_trial(self.sweep_id, trial["number"], events_seen=events[-1]["id"])

    def _epoch(self, number: int, job_id: str, epoch: int, metrics: dict[str, Any]) -> None:
        metric = self.spec.objective.metric
        if metric not in metrics:
            self._missing_metric(sorted(metrics))
        value = float(metrics[metric])
        if not math.isfinite(value):
            return
        prune = study.report(self.study, number, value, epoch)
        trial = self.db_trial(number)
        if trial["state"] != "running":  # a stop is on its way: later epochs are recorded, not judged
            return
        if self.spec.pruner == "median" and prune:
            self._stop_trial(number, job_id, "pruning", f"pruned at epoch {epoch}: {metric} {value:.4g} is worse "
                             "than the median of the earlier trials at that epoch")
        elif self.spec.pruner == "asha" and asha.is_rung(epoch) and epoch > trial["rung"]:
            self.db.update_trial(self.sweep_id, number, rung=epoch)
            if not asha.promotable(self._rung_values(epoch), number, self.spec.objective.mode):
                self._stop_trial(number, job_id, "pausing", f"paused by ASHA at epoch {epoch}: {metric} "
                                 f"{value:.4g} is not in the rung's best 1/{asha.REDUCTION_FACTOR} so far")

    def _stop_trial(self, number: int, job_id: str, state: str, why: str) -> None:
        self.db.update_trial(self.sweep_id, number, state=state)
        self.jobs.add_event(job_id, "sweep", why)
        job = self.jobs.get_job(job_id)
        if not JobState(job["state"]).is_terminal():
            self.jobs.request_stop(job_id, StopRequest.PRUNE)

    def _closed(self, trial: dict[str, Any], job: JobRecord) -> None:
        """The trial's job ended: close the trial in the study and in the rows."""
        number, state = trial["number"], JobState(job["state"])
        # Stopped with no step left (a pause that landed on the last step), or by a rule of the
        # base job: the trial is done, and its last value counts.
        done = state is JobState.STOPPED and (trial["state"] == "running" or (
            job["total_steps"] is not None and job["step"] >= job["total_steps"]))
        if state is JobState.COMPLETED or done:
            value = self._final_value(trial, job)
            if value is None:
                study.tell(self.study, number, "fail")
                self.db.update_trial(self.sweep_id, number, state="failed")
            else:
                study.tell(self.study, number, "complete", value)
                self.db.update_trial(self.sweep_id, number, state="completed", value=value)
        elif state is JobState.STOPPED and trial["state"] == "pausing":
            self.db.update_trial(self.sweep_id, number, state="paused")
        elif state is JobState.STOPPED:
            study.tell(self.study, number, "pruned")
            self.db.update_trial(self.sweep_id, number, state="pruned")
        else:
            study.tell(self.study, number, "fail")
            self.db.update_trial(self.sweep_id, number, state="failed" if state is JobState.FAILED else "cancelled")

    def _final_value(self, trial: dict[str, Any], job: JobRecord) -> float | None:
        result = job_result(job["result_json"])
        value = (result.get("metrics") or {}).get(self.spec.objective.metric)
        if value is None:
            epochs = [t for t in self.study.get_trials(deepcopy=False) if t.number == trial["number"]]
            values = epochs[0].intermediate_values if epochs else {}
            value = values[max(values)] if values else None
        return float(value) if value is not None and math.isfinite(float(value)) else None

    def _missing_metric(self, reported: list[str]) -> None:
        metric = self.spec.objective.metric
        message = (f"Invalid `objective.metric`: received {metric!r}, but the script's first epoch reported "
                   f"{', '.join(reported) or 'no metrics'}.")
        self.stop_all("failed", message)
        raise UsageError(message, hint="Set `objective.metric` to a metric the script reports each epoch "
                                        "(a `val_` metric needs `validation_data` in `fit`).")

    def stop_all(self, state: str, why: str) -> None:
        """End the sweep: every running trial's job saves a checkpoint and stops."""
        for trial in self.db.trials(self.sweep_id):
            if trial["state"] in FINAL:
                continue
            if trial["job_id"]:
                sdk.cancel(trial["job_id"])
            study.tell(self.study, trial["number"], "fail")
            self.db.update_trial(self.sweep_id, trial["number"], state="cancelled")
        self.db.update_sweep(self.sweep_id, state=state, message=why)

    def spent_usd(self) -> float:
        return spent_usd(self.db.trials(self.sweep_id), self.jobs)


def spent_usd(rows: list[dict[str, Any]], jobs: StateDB) -> float:
    """What the sweep's trial jobs have cost so far (their ended attempts, as the ledger bills them)."""
    return sum(a["cost_usd"] or 0.0 for t in rows if t["job_id"] for a in jobs.attempts(t["job_id"]))
