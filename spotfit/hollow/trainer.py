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

from spotfit.attempt.exit_codes import EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.attempt.progress import Phase
from spotfit.attempt.result import Result
from spotfit.errors import StoreError, UsageError
from spotfit.hollow import scenario as scenarios
from spotfit.hollow.model import HollowModel, batch_order
from spotfit.hollow.scenario import Fit, Scenario
from spotfit.runtime.checkpoint import Checkpoint
from spotfit.runtime.job_data import sync_job_data
from spotfit.runtime.preemption import Preempted
from spotfit.runtime.session import Session

SAVE_RETRY_S = 10.0  # as runtime/hooks.py


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


class _FitCall:
    """One `fit` call of the scenario: the real callback's hooks, in Keras's order."""

    def __init__(self, session: Session, scenario: Scenario, fit: Fit, model: HollowModel):
        self.s, self.scenario, self.fit, self.model = session, scenario, fit, model
        self.calls = session.calls
        self.step = self.epoch = self.batch_in_epoch = 0
        self._last_save_t = self._failed_t = 0.0
        self._last_save_step = self._failed_step = 0
        self._at_epoch_end: str | None = None
        self._skipped_nonfinite = False
        self._first_step_seen = False
        self._holds: list[int] = []
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
                order = batch_order(self.s.config.seed, self.fit_index, epoch, self.fit.steps_per_epoch,
                                    self.scenario.shuffle)
                self._losses = [self.scenario.loss_at(self.calls.base_step + epoch * self.fit.steps_per_epoch + b + 1)
                                for b in range(first_batch)]
                for batch in range(first_batch, self.fit.steps_per_epoch):
                    self._train_batch(batch, order[batch])
                first_batch = 0
                self._epoch_end(epoch)
            self._train_end()
        finally:
            self.s.watcher.in_training = False

    # -- the real callback's hooks ------------------------------------------------------------

    def _train_begin(self, resume: Checkpoint | None) -> None:
        s, rep = self.s, self.s.reporter
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
        self._last_save_t, self._last_save_step = time.perf_counter(), self.step
        self._holds = sorted(at for at in s.config.hold_at_steps if at > self.step)
        rep.progress(force=True, phase=Phase.TRAINING, step=self.step, total_steps=total,
                     total_steps_estimated=True, fit_index=self.fit_index)
        s.watcher.in_training = True

    def _train_batch(self, batch: int, data_index: int) -> None:
        s, scenario = self.s, self.scenario
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
        first_nan = s.reporter.step_done(self.step, loss, self.epoch)
        if not self._first_step_seen:
            self._first_step_seen = True
            s.stepped = True
            s.reporter.timing("first_step_s", time.time() - s.t_started)
            s.reporter.progress(force=True)
        if first_nan:
            self._nan_loss()
        if self._holds and self._holds[0] <= self.step:
            while self._holds and self._holds[0] <= self.step:
                self._holds.pop(0)
            if self.step > self._last_save_step:
                self._hold()
        last_of_epoch = self.batch_in_epoch >= self.fit.steps_per_epoch
        self._check_stop()
        if s.stop.target is not None and self.step >= s.stop.target:
            if last_of_epoch:
                self._at_epoch_end = "stop"
                return
            self._stop_now()
        if self._due():
            if last_of_epoch:
                self._at_epoch_end = "interval"
            else:
                self._save("interval")

    def _epoch_end(self, epoch: int) -> None:
        s = self.s
        finite = [v for v in self._losses if v == v]
        # A NaN loss in the epoch makes its mean NaN, which the real callback reports as null.
        mean = sum(finite) / len(finite) if finite and len(finite) == len(self._losses) else None
        metrics: dict = {"loss": mean, **self.scenario.epoch_metrics(self.fit_index - 1, epoch)}
        s.reporter.progress(force=True, metrics=metrics, metrics_step=self.step, epoch=epoch + 1)
        if s.is_chief:
            s.reporter.event("epoch_end", f"epoch {epoch + 1} ended at step {self.step}", epoch=epoch + 1,
                             step=self.step, metrics=metrics)
        s.last_metrics = metrics
        self.epoch, self.batch_in_epoch = epoch + 1, 0
        deferred, self._at_epoch_end = self._at_epoch_end, None
        self._check_stop()
        if deferred == "stop" or (s.stop.target is not None and self.step >= s.stop.target):
            self._stop_now()
        if deferred == "interval" or self._due():
            self._save("interval")

    def _train_end(self) -> None:
        self.calls.finish(self.step - self.calls.base_step)
        self._save("end", call_done=True)
        self.s.watcher.in_training = False

    def _skip(self, record: Checkpoint | None) -> None:
        """An earlier call that ended before the checkpoint returns at once with its end state."""
        rep = self.s.reporter
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
        scenario, notice = self.scenario, self.s.watcher.notice
        if scenario.fails_in(self.s.config.attempt) and scenario.fail_at_step == step:
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
            while not (self.s.stop_asked.wait(0.02) or notice.is_set()):  # a notice stops it here, as the runtime does
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out after {scenario.wait_timeout_s:g}s waiting for a stop request "
                                     f"at step {step}")
        for raw in scenario.handoffs:
            turn = {k: v.format(job_id=self.s.config.job_id) if isinstance(v, str) else v for k, v in raw.items()}
            if turn["at"] == step and not Path(turn["touch"]).exists():
                _hand_over(turn, self.s)
        if scenario.pause_at == step:
            folder = Path(scenario.pause_dir)
            if not (folder / "paused").exists():
                (folder / "paused").write_text(str(step))
                deadline = time.monotonic() + 300
                while not (folder / "go").exists():
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the test never created {folder / 'go'}")
                    time.sleep(0.05)

    # -- spotfit's part: as runtime/hooks.py ---------------------------------------------

    def _check_stop(self) -> None:
        s = self.s
        if s.stop.target is None:
            if s.watcher.notice.is_set():
                s.stop.propose(self.step, s.watcher.source or "notice", EXIT_PREEMPTED)
            elif s.stop_asked.is_set():
                s.stop.propose(self.step, "stop", EXIT_STOPPED)

    def _stop_now(self) -> None:
        s = self.s
        stopped = s.stop.code == EXIT_STOPPED
        self._save("stop" if stopped else (s.stop.reason or "notice"))
        s.reporter.progress(force=True, phase=Phase.STOPPED if stopped else Phase.PREEMPTED)
        raise Preempted(s.stop.code)

    def _due(self) -> bool:
        cfg = self.s.config
        if cfg.interval_steps:
            return self.step - max(self._last_save_step, self._failed_step) >= cfg.interval_steps
        interval = self.s.interval_s()
        since = time.perf_counter() - max(self._last_save_t, self._failed_t)
        if interval is None:
            return not self._failed_t or since >= SAVE_RETRY_S
        return since >= interval

    def _position(self) -> tuple[int, int]:
        if self.batch_in_epoch >= self.fit.steps_per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.batch_in_epoch

    def _save(self, reason: str, call_done: bool = False) -> None:
        s = self.s
        epoch, batch = self._position()
        meta = {"fit_index": self.fit_index, "call_done": call_done,
                "calls": {str(i): n for i, n in self.calls.finished.items()}, "step": self.step, "epoch": epoch,
                "batch": batch, "reason": reason, "attempt": s.config.attempt, "python_rng": list(random.getstate()),
                "python_rng_epoch": None}
        s.reporter.progress(force=True, phase=Phase.SAVING)
        arrays = self.model.arrays()
        if not all(v == v for v in arrays["weights"]):
            self._skip_save(reason)
            return
        try:
            seconds = s.checkpoints.save(self.step, arrays, meta)
            records = self.calls.records() if call_done else None
            if records is not None:
                seconds += records.save(self.step, arrays, meta)
        except StoreError as exc:
            self._failed_t, self._failed_step = time.perf_counter(), self.step
            s.reporter.progress(force=True, phase=Phase.TRAINING)
            s.reporter.event("checkpoint_failed", f"could not save step {self.step} ({reason}), "
                             f"retrying at the next interval: {exc}", step=self.step, reason=reason)
            return
        s.record_save(seconds)
        s.reporter.progress(force=True, phase=Phase.TRAINING)
        s.reporter.event("checkpoint", f"saved step {self.step} ({reason}) in {seconds:.3f}s",
                         step=self.step, save_s=seconds, reason=reason)
        self._last_save_t, self._last_save_step = time.perf_counter(), self.step

    def _skip_save(self, reason: str) -> None:
        s = self.s
        self._failed_t, self._failed_step = time.perf_counter(), self.step
        s.reporter.progress(force=True, phase=Phase.TRAINING)
        if not self._skipped_nonfinite:
            self._skipped_nonfinite = True
            s.reporter.event("checkpoint_skipped", f"not saving step {self.step} ({reason}): the weights are "
                             "NaN or infinite; the newest checkpoint stays the last good one",
                             step=self.step, reason=reason)

    def _nan_loss(self) -> None:
        s = self.s
        s.reporter.event("nan_loss", f"the loss is NaN or infinite at step {self.step}", step=self.step)
        s.reporter.progress(force=True)
        if s.config.hold_on_nan and s.wait_for_stop(s.config.hold_timeout_s):
            s.stop.propose(self.step, "stop", EXIT_STOPPED)

    def _hold(self) -> None:
        s = self.s
        s.reporter.progress(force=True, phase=Phase.HOLDING, step=self.step)
        s.reporter.event("hold", f"holding at step {self.step} for the injected preemption", step=self.step)
        s.watcher.notice.wait(s.config.hold_timeout_s)


def _rng_state(saved: list) -> tuple:
    """Python's RNG state as `random.getstate()` gave it, from its JSON lists."""
    version, internal, gauss = saved
    return version, tuple(internal), gauss
