"""The hollow trainer: the real runtime's `train_script`, with the script and Keras replaced by a scenario.

`train(session)` is handed to `spotfit.runtime.main.run`, which does everything around it as
for a real attempt. Inside, each `fit` call of the scenario runs the loop that the real
runtime's main callback (`SpotfitHooks`, runtime/hooks.py) drives inside Keras, step for step: the same
restore and start events, the same held steps, stop agreement, periodic, epoch-end, notice and
end saves through the same `CheckpointStore` and `FitCalls`, the same progress and epoch
events. What the script would do at a step (stand still for the market, pause for the test,
fail) runs before spotfit's part of that step, as a script's callbacks run before spotfit's.
"""

from __future__ import annotations

import builtins
import os
import random
import signal
import time
from pathlib import Path

from spotfit.attempt.progress import Phase
from spotfit.attempt.result import Result
from spotfit.errors import UsageError
from spotfit.hollow import scenario as scenarios
from spotfit.hollow.model import HollowModel, batch_order
from spotfit.hollow.scenario import Fit, Scenario
from spotfit.runtime.checkpoint import Checkpoint
from spotfit.runtime.job_data import sync_job_data
from spotfit.runtime.session import Session
from spotfit.runtime.step_duties import StepDuties


def train(session: Session) -> int | Result:
    """Train the scenario of the job's script; its result, or the script's own exit code."""
    config, rep = session.config, session.reporter
    if session.cluster.multi:
        raise UsageError(f"Invalid hollow attempt: received {session.cluster.workers} workers, expected 1",
                         hint="Multi-worker attempts run the real runtime (unset SPOTFIT_HOLLOW).")
    scenario = scenarios.load(config.script, config.args)
    random.seed(config.seed)
    session.load_checkpoint()
    sync_job_data(config, rep)
    rep.progress(force=True, phase=Phase.RUNNING_SCRIPT)
    for line in scenario.prints:
        print(line, flush=True)
    time.sleep(scenario.start_s)  # the imports: a notice here ends the attempt, as in the real runtime
    if scenario.fails_in(config.attempt) and scenario.fail_at_step == 0:
        _fail(scenario)
    if scenario.kill_at_step == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    model = HollowModel(config.seed)
    for fit in scenario.fits:
        _FitCall(session, scenario, fit, model).run()
    if scenario.exit_code:
        return scenario.exit_code
    return {"step": rep.state["step"], "weights_sha256": model.sha256(), "metrics": session.last_metrics,
            "attempt": config.attempt, "offers": []}


def _hand_over(turn: dict, session: Session) -> None:
    """One of the script's turns with the test: create `touch`, then wait for `wait_for` (or, `until_stop`,
    the controller's stop request or a notice) or SIGTERM itself."""
    Path(turn["touch"]).touch()
    if turn.get("sigterm"):
        os.kill(os.getpid(), signal.SIGTERM)
    if turn.get("wait_for"):
        done, deadline = Path(turn["wait_for"]), time.monotonic() + 600
        asked = (session.stop_asked, session.watcher.notice) if turn.get("until_stop") else ()
        while not done.exists() and not any(event.is_set() for event in asked):
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for the test to create {done}")
            time.sleep(0.02)


def _fail(scenario: Scenario) -> None:
    error = getattr(builtins, scenario.fail_error, None)
    if not (isinstance(error, type) and issubclass(error, Exception)):
        error = RuntimeError
    raise error(scenario.fail_message)


class _FitCall(StepDuties):
    """One `fit` call of the scenario: the real callback's hooks, in Keras's order, and spotfit's
    duties at each step from the same code as the real callback's (runtime/step_duties.py)."""

    def __init__(self, session: Session, scenario: Scenario, fit: Fit, model: HollowModel):
        self.session, self.scenario, self.fit, self.model = session, scenario, fit, model
        self.calls = session.calls
        self.step = self.epoch = self.batch_in_epoch = 0
        self.steps_per_epoch = fit.steps_per_epoch
        self._init_duties()
        self._losses: list[float] = []
        self.first_step: int | None = None  # this attempt's first step (the script's own view)

    def run(self) -> None:
        start = self.calls.begin()
        self.fit_index = self.calls.index
        if start.role == "skip":
            self._skip(start.checkpoint)
            return
        resume = start.checkpoint
        self._train_begin(resume)
        try:
            first_batch = 0 if resume is None else int(resume.meta["batch"])
            for epoch in range(self.epoch, self.fit.epochs):
                self.epoch, self.batch_in_epoch = epoch, 0
                order = batch_order(self.session.config.seed, self.fit_index, epoch, self.fit.steps_per_epoch,
                                    self.scenario.shuffle)
                self._losses = [self.scenario.loss_at(self.calls.base_step + epoch * self.fit.steps_per_epoch + b + 1)
                                for b in range(first_batch)]
                for batch in range(first_batch, self.fit.steps_per_epoch):
                    self._train_batch(batch, order[batch])
                first_batch = 0
                self._epoch_end(epoch)
            self._train_end()
        finally:
            self.session.watcher.in_training = False

    # -- the real callback's hooks ------------------------------------------------------------

    def _train_begin(self, resume: Checkpoint | None) -> None:
        s, rep = self.session, self.session.reporter
        total = self.calls.planned_total(self.fit.steps)
        self.step = self.calls.base_step
        if resume is not None:
            t0 = time.perf_counter()
            self.model.load(resume.arrays)
            random.setstate(_rng_state(resume.meta["python_rng"]))
            self.step, self.epoch = int(resume.meta["step"]), int(resume.meta["epoch"])
            restore_s = time.perf_counter() - t0 + s.load_s
            rep.timing("restore_s", restore_s)
            rep.event("restored", f"resumed at step {self.step} (fit call {self.fit_index}, epoch {self.epoch}, "
                      f"batch {resume.meta['batch']})", step=self.step, fit_index=self.fit_index, restore_s=restore_s)
        elif not self.calls.trained_here:
            rep.event("started", f"trains from step {self.step} (fit call {self.fit_index}): no checkpoint "
                      "of this call to restore", step=self.step, fit_index=self.fit_index)
        self.calls.trained_here = True
        if self.fit_index > 1:
            rep.event("fit_call", f"fit call {self.fit_index} begins at step {self.calls.base_step}; "
                      f"total_steps {total} is an estimate until the script ends",
                      fit_index=self.fit_index, step=self.calls.base_step, total_steps=total)
        self._begin_training(total)

    def _train_batch(self, batch: int, data_index: int) -> None:
        scenario = self.scenario
        if scenario.stall_after is not None and self.step >= scenario.stall_after:
            while not Path(scenario.stall_until).exists():  # the data never arrives
                time.sleep(0.05)
        time.sleep(scenario.step_s)
        self.model.train_step(data_index)
        loss = scenario.loss_at(self.step + 1)
        if loss != loss:  # NaN: the weights follow
            self.model.poison()
        self._losses.append(loss)
        if self.first_step is None:
            self.first_step = self.step + 1
        self._script_batch_end(self.step + 1)
        self.step += 1
        self.batch_in_epoch = batch + 1
        self._after_step(loss, last_of_epoch=self.batch_in_epoch >= self.fit.steps_per_epoch)

    def _epoch_end(self, epoch: int) -> None:
        s = self.session
        finite = [v for v in self._losses if v == v]
        # A NaN loss in the epoch makes its mean NaN, which the real callback reports as null.
        mean = sum(finite) / len(finite) if finite and len(finite) == len(self._losses) else None
        metrics: dict = {"loss": mean, **self.scenario.epoch_metrics(self.fit_index - 1, epoch)}
        s.reporter.progress(force=True, metrics=metrics, metrics_step=self.step, epoch=epoch + 1)
        if s.is_chief:
            s.reporter.event("epoch_end", f"epoch {epoch + 1} ended at step {self.step}", epoch=epoch + 1,
                             step=self.step, metrics=metrics)
        s.last_metrics = metrics
        self._after_epoch(epoch)

    def _train_end(self) -> None:
        self._end_call()

    def _skip(self, record: Checkpoint | None) -> None:
        """An earlier call that ended before the checkpoint returns at once with its end state."""
        rep = self.session.reporter
        if record is None:
            rep.event("fit_skipped", f"fit call {self.fit_index} finished before the checkpoint; its end "
                      "state was not recorded, the next call restores the checkpoint")
            return
        self.model.load(record.arrays)
        rep.progress(step=record.meta["step"])
        rep.event("fit_skipped", f"fit call {self.fit_index} finished before the checkpoint: restored its end "
                  f"state at step {record.meta['step']}", fit_index=self.fit_index, step=record.meta["step"])

    # -- what the script does at a step -------------------------------------------------------

    def _script_batch_end(self, step: int) -> None:
        scenario, notice = self.scenario, self.session.watcher.notice
        if scenario.fails_in(self.session.config.attempt) and scenario.fail_at_step == step:
            _fail(scenario)
        if scenario.kill_at_step == step:
            os.kill(os.getpid(), signal.SIGKILL)
        if step in scenario.wait_for_notice_at and not notice.is_set():
            print(f"step {step}: waiting for the market to preempt this attempt", flush=True)
            if not notice.wait(scenario.wait_timeout_s):
                raise SystemExit(f"timed out after {scenario.wait_timeout_s:g}s waiting for a market preemption "
                                 f"at step {step}")
        if scenario.wait_for_stop_at == step and self.first_step == 1:
            print(f"step {step}: waiting for the controller's stop request (or a notice)", flush=True)
            deadline = time.monotonic() + scenario.wait_timeout_s
            # A notice stops it here, as the runtime does.
            while not (self.session.stop_asked.wait(0.02) or notice.is_set()):
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out after {scenario.wait_timeout_s:g}s waiting for a stop request "
                                     f"at step {step}")
        for raw in scenario.handoffs:
            turn = {k: v.format(job_id=self.session.config.job_id) if isinstance(v, str) else v for k, v in raw.items()}
            if turn["at"] == step and not Path(turn["touch"]).exists():
                _hand_over(turn, self.session)
        if scenario.pause_at == step:
            folder = Path(scenario.pause_dir)
            if not (folder / "paused").exists():
                (folder / "paused").write_text(str(step))
                deadline = time.monotonic() + 300
                while not (folder / "go").exists():
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the test never created {folder / 'go'}")
                    time.sleep(0.05)

    # -- spotfit's part: its duties are runtime/step_duties.py's; only the arrays are the trainer's --

    def _save(self, reason: str, call_done: bool = False) -> None:
        s = self.session
        meta = self._meta(reason, call_done)
        s.reporter.progress(force=True, phase=Phase.SAVING)
        arrays = self.model.arrays()
        if not all(v == v for v in arrays["weights"]):
            self._skip_save(reason)
            return
        self._write_checkpoint(arrays, meta, reason, call_done)


def _rng_state(saved: list) -> tuple:
    """Python's RNG state as `random.getstate()` gave it, from its JSON lists."""
    version, internal, gauss = saved
    return version, tuple(internal), gauss
