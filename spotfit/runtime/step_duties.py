"""What spotfit does around each training step, whoever trains: one implementation for two trainers.

The main callback (`SpotfitHooks`, hooks.py) runs these duties inside Keras's `fit`; the hollow
trainer (spotfit/hollow/trainer.py) runs them in its NumPy loop. Both inherit them from
`StepDuties`, so the hollow attempt cannot drift from the real one in what the controller sees:
the first step's timing, NaN losses, held steps, the stop every worker agrees on, periodic saves
(deferred from an epoch's last batch to its end), the end's save, and how a checkpoint is written,
retried and reported. Each trainer supplies what only it knows: its step counters, the arrays of
its model (`_save`) and, for the real one, the script's callbacks' state.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from spotfit.attempt.exit_codes import EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.attempt.progress import Phase
from spotfit.errors import StoreError
from spotfit.runtime.fit_calls import FitCalls
from spotfit.runtime.preemption import Preempted

if TYPE_CHECKING:
    from spotfit.runtime.session import Session

SAVE_RETRY_S = 10.0  # `interval: auto` before any save succeeded: wait this long after a failure


class StepDuties:
    """spotfit's part of a `fit` call, step by step; the trainer calls `_after_step`,
    `_after_epoch` and `_end_call`, and implements `_save(reason, call_done)`."""

    session: Session
    calls: FitCalls
    fit_index: int
    step: int
    epoch: int
    batch_in_epoch: int
    steps_per_epoch: int | None
    after_save: tuple[Callable[[], None], ...] = ()  # called after each checkpoint (TensorBoard flushes)
    _python_rng_epoch: list | None = None  # Python's RNG state when this epoch began (Keras 3's batch order)

    def _init_duties(self) -> None:
        self._last_save_t = 0.0
        self._last_save_step = 0
        self._failed_t = 0.0  # last failed save (store unreachable): the next try waits an interval
        self._failed_step = 0
        self._first_step_seen = False
        self._skipped_nonfinite = False
        self._at_epoch_end: str | None = None  # a save deferred from an epoch's last batch: its reason
        self._holds: list[int] = []  # injected preemptions still ahead, ascending

    def _save(self, reason: str, call_done: bool = False) -> None:
        raise NotImplementedError

    # -- the call's beginning, steps, epoch ends and end ---------------------------------------

    def _begin_training(self, total: int | None) -> None:
        """After the restore (or the start) and the events that say which: saves are due from now."""
        s = self.session
        self._last_save_t, self._last_save_step = time.perf_counter(), self.step
        self._holds = sorted(at for at in s.config.hold_at_steps if at > self.step)
        s.reporter.progress(force=True, phase=Phase.TRAINING, step=self.step, total_steps=total,
                            total_steps_estimated=True, fit_index=self.fit_index)
        s.watcher.in_training = True

    def _after_step(self, loss, last_of_epoch: bool) -> None:
        """After step `self.step` (already counted) and the script's own work at its end.

        The hot path: memory only. Progress is written by the reporter's heartbeat thread and
        `control/stop` is read by the session's polling thread; here only flags are checked.
        """
        s = self.session
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
        # An epoch's last batch: its save waits for the epoch's end (validation, callbacks).
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

    def _after_epoch(self, epoch: int) -> None:
        """After epoch `epoch`'s end work and its report: a deferred or due save, a stop."""
        s = self.session
        self.epoch, self.batch_in_epoch = epoch + 1, 0  # the epoch is complete, its end work included
        deferred, self._at_epoch_end = self._at_epoch_end, None
        self._check_stop()  # a notice during validation stops here, after the epoch's end
        if deferred == "stop" or (s.stop.target is not None and self.step >= s.stop.target):
            self._stop_now()
        if deferred == "interval" or self._due():
            self._save("interval")

    def _end_call(self) -> None:
        # Always: callbacks' train-end work (EarlyStopping's best weights) changes the state.
        self.calls.finish(self.step - self.calls.base_step)
        self._save("end", call_done=True)
        self.session.watcher.in_training = False

    # -- stops, saves, holds ----------------------------------------------------------------

    def _check_stop(self) -> None:
        """A notice or a stop request: every worker stops after the same step (strategy.py)."""
        s = self.session
        if s.stop.target is None:
            if s.watcher.notice.is_set():
                s.stop.propose(self.step, s.watcher.source or "notice", EXIT_PREEMPTED)
            elif s.stop_asked.is_set():
                s.stop.propose(self.step, "stop", EXIT_STOPPED)

    def _stop_now(self) -> None:
        s = self.session
        stopped = s.stop.code == EXIT_STOPPED
        self._save("stop" if stopped else (s.stop.reason or "notice"))
        s.reporter.progress(force=True, phase=Phase.STOPPED if stopped else Phase.PREEMPTED)
        raise Preempted(s.stop.code)

    def _position(self) -> tuple[int, int]:
        if self.steps_per_epoch and self.batch_in_epoch >= self.steps_per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.batch_in_epoch

    def _due(self) -> bool:
        cfg = self.session.config
        if cfg.interval_steps:
            return self.step - max(self._last_save_step, self._failed_step) >= cfg.interval_steps
        interval = self.session.interval_s()
        since = time.perf_counter() - max(self._last_save_t, self._failed_t)
        if interval is None:  # auto: the first save measures the save cost
            return not self._failed_t or since >= SAVE_RETRY_S
        return since >= interval

    def _meta(self, reason: str, call_done: bool) -> dict:
        """A checkpoint's metadata: where the job stands, and the RNG state to resume with."""
        epoch, batch = self._position()
        return {
            "fit_index": self.fit_index,
            "call_done": call_done,
            "calls": {str(i): n for i, n in self.calls.finished.items()},
            "step": self.step,
            "epoch": epoch,
            "batch": batch,
            "reason": reason,
            "attempt": self.session.config.attempt,
            "python_rng": list(random.getstate()),
            "python_rng_epoch": self._python_rng_epoch,
        }

    def _write_checkpoint(self, arrays: dict, meta: dict, reason: str, call_done: bool) -> None:
        """Save `arrays` at this step (and the call's end record); a store failure is reported and retried later."""
        s = self.session
        try:
            seconds = s.checkpoints.save(self.step, arrays, meta)
            records = self.calls.records() if call_done else None
            if records is not None:  # the call's end state, for a resume that skips this call
                seconds += records.save(self.step, arrays, meta)
        except StoreError as exc:
            # Training goes on from the previous checkpoint's safety; the next interval retries.
            self._failed_t, self._failed_step = time.perf_counter(), self.step
            s.reporter.progress(force=True, phase=Phase.TRAINING)
            s.reporter.event("checkpoint_failed", f"could not save step {self.step} ({reason}), "
                             f"retrying at the next interval: {exc}", step=self.step, reason=reason)
            return
        s.record_save(seconds)
        s.reporter.progress(force=True, phase=Phase.TRAINING)
        s.reporter.event("checkpoint", f"saved step {self.step} ({reason}) in {seconds:.3f}s",
                         step=self.step, save_s=seconds, reason=reason)
        for listener in self.after_save:
            listener()
        self._last_save_t = time.perf_counter()
        self._last_save_step = self.step

    def _skip_save(self, reason: str) -> None:
        """NaN or infinite weights are not saved: they would rotate the last good checkpoints out."""
        s = self.session
        self._failed_t, self._failed_step = time.perf_counter(), self.step  # the next try waits an interval
        s.reporter.progress(force=True, phase=Phase.TRAINING)
        if not self._skipped_nonfinite:
            self._skipped_nonfinite = True
            s.reporter.event("checkpoint_skipped", f"not saving step {self.step} ({reason}): the weights are "
                             "NaN or infinite; the newest checkpoint stays the last good one",
                             step=self.step, reason=reason)

    def _nan_loss(self) -> None:
        """The first NaN or infinite loss: report it at once; under a rule that stops, wait here for it.

        Waiting keeps the stop at this very step, however fast steps are; the wait ends with the
        controller's stop request, a preemption notice, or after `hold_timeout_s`.
        """
        s = self.session
        s.reporter.event("nan_loss", f"the loss is NaN or infinite at step {self.step}", step=self.step)
        s.reporter.progress(force=True)
        if s.config.hold_on_nan and s.wait_for_stop(s.config.hold_timeout_s):
            s.stop.propose(self.step, "stop", EXIT_STOPPED)

    def _hold(self) -> None:
        """An injected preemption: stand still at this step until the backend's signal."""
        s = self.session
        s.reporter.progress(force=True, phase=Phase.HOLDING, step=self.step)
        s.reporter.event("hold", f"holding at step {self.step} for the injected preemption", step=self.step)
        s.watcher.notice.wait(s.config.hold_timeout_s)
