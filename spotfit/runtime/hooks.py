"""The main callback's hooks, which make unmodified scripts checkpoint and resume exactly.

`SpotfitHooks` is the main callback without a Keras base class: instrument.py puts it on Keras 3's
`Callback` (`SpotfitCallback`), runtime/keras2/fit.py on Keras 2's; this module imports no Keras.
The callback is added to every fit call by the fit wrapper (fit_wrapper.py) and driven by
`spotfit.loop` and the `GradientTape` hook too. It restores the checkpoint when training begins
(model, optimizer and random-layer state, NumPy and Python RNG state, the script's callbacks'
state: callback_state.py), writes progress, saves periodically and on a preemption notice, and
then raises `Preempted` so that the process exits with `EXIT_PREEMPTED`.

A script may call `fit` several times (for example, frozen then fine-tuned): steps are the
job's global steps, and checkpoints record which call they belong to (fit_calls.py). A save that
falls on an epoch's last batch waits for the end of that epoch (validation, the callbacks'
epoch-end work), so that a resumed run never skips an epoch end.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from spotfit.attempt.exit_codes import EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.attempt.progress import Phase
from spotfit.errors import StoreError
from spotfit.runtime import callback_state
from spotfit.runtime.checkpoint import Checkpoint
from spotfit.runtime.fit_calls import FitCalls
from spotfit.runtime.model_state import (
    _set_python_rng,
    capture,
    restore,
    restore_metrics,
)
from spotfit.runtime.preemption import Preempted

if TYPE_CHECKING:
    from spotfit.runtime.session import Session

TARGET_ENDS_KEPT = 8  # epoch ends meeting a stopping target whose weights an export may need
SAVE_RETRY_S = 10.0  # `interval: auto` before any save succeeded: wait this long after a failure


class SpotfitHooks:
    """Restores, reports, checkpoints and reacts to preemption notices inside one `fit` call.

    The hooks of the main callback, on no Keras base class: `SpotfitCallback` puts them on Keras
    3's `Callback`, runtime/keras2/ on Keras 2's (`tf_keras`), which calls them the same way.

    `watched`: the call's other stateful callbacks (its History first, then the script's),
    whose state each checkpoint carries. `initial_epoch`: the script's own `initial_epoch`.
    `planned_steps`: the call's steps when Keras's params do not say (`spotfit.loop`).
    `after_save`: called after each checkpoint is saved (the TensorBoard log flushes then).
    """

    model: Any  # set by Keras (`set_model`), as `params` (`set_params`)
    params: dict
    # Keras 3 draws a resumed epoch's batch order after `on_epoch_begin`, which puts Python's RNG
    # back for it; Keras 2 draws it before (its data replay sees to it: runtime/keras2/resume.py).
    epoch_order_at_begin = True

    def __init__(self, session: Session, resume_ckpt: Checkpoint | None, watched: list,
                 initial_epoch: int = 0, after_save: tuple[Callable[[], None], ...] = (),
                 planned_steps: int | None = None):
        super().__init__()
        self.session = session
        self.after_save = after_save
        self.calls: FitCalls = session.calls
        self.fit_index = self.calls.index
        self.resume_meta = None if resume_ckpt is None else resume_ckpt.meta
        self._arrays = None if resume_ckpt is None else resume_ckpt.arrays
        self.watched = watched
        self.initial_epoch = initial_epoch
        self.planned_steps = planned_steps
        self.step = 0
        self.epoch = 0
        self.batch_in_epoch = 0
        self.steps_per_epoch: int | None = None
        self._last_save_t = 0.0
        self._last_save_step = 0
        self._failed_t = 0.0  # last failed save (store unreachable): the next try waits an interval
        self._failed_step = 0
        self._first_step_seen = False
        self._skipped_nonfinite = False
        self._metrics_pending: dict | None = None  # running metric sums to put back mid-epoch
        self._python_rng_epoch: list | None = None  # Python's RNG state when this epoch began
        self._at_epoch_end: str | None = None  # a save deferred from an epoch's last batch: its reason
        self._warned_left_out: set[str] = set()
        self._holds: list[int] = []  # injected preemptions still ahead, ascending

    # -- Keras hooks ----------------------------------------------------------------------

    def on_train_begin(self, logs=None):
        s = self.session
        self.steps_per_epoch = self.params.get("steps")
        epochs = self.params.get("epochs") or 1
        call_steps = (self.steps_per_epoch * max(0, epochs - self.initial_epoch) if self.steps_per_epoch
                      else self.planned_steps)
        total = self.calls.planned_total(call_steps)
        self.step = self.calls.base_step
        self.epoch = self.initial_epoch
        if self.resume_meta is not None and self._arrays is not None:
            t0 = time.perf_counter()
            restore(self.model, self._arrays, self.resume_meta)
            restore_callbacks(s, self.watched, self._arrays)
            if self.resume_meta["batch"]:
                self._metrics_pending = self._arrays
            self._arrays = None
            self.step = self.resume_meta["step"]
            self.epoch = self.resume_meta["epoch"]
            self.model._initial_epoch = self.epoch
            restore_s = time.perf_counter() - t0 + s.load_s
            s.reporter.timing("restore_s", restore_s)
            s.reporter.event(
                "restored",
                f"resumed at step {self.step} (fit call {self.fit_index}, epoch {self.epoch}, "
                f"batch {self.resume_meta['batch']})",
                step=self.step,
                fit_index=self.fit_index,
                restore_s=restore_s,
            )
        elif not s.calls.trained_here:  # the attempt's first training call, with no checkpoint of it
            s.reporter.event("started", f"trains from step {self.step} (fit call {self.fit_index}): no checkpoint "
                             "of this call to restore", step=self.step, fit_index=self.fit_index)
        s.calls.trained_here = True
        if self.fit_index > 1:
            s.reporter.event("fit_call", f"fit call {self.fit_index} begins at step {self.calls.base_step}; "
                             f"total_steps {total} is an estimate until the script ends",
                             fit_index=self.fit_index, step=self.calls.base_step, total_steps=total)
        self._last_save_t = time.perf_counter()
        self._last_save_step = self.step
        self._holds = sorted(at for at in s.config.hold_at_steps if at > self.step)
        s.reporter.progress(force=True, phase=Phase.TRAINING, step=self.step, total_steps=total,
                            total_steps_estimated=True, fit_index=self.fit_index)
        s.watcher.in_training = True

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self.batch_in_epoch = 0
        saved_rng = None if self._metrics_pending is None else (self.resume_meta or {}).get("python_rng_epoch")
        if saved_rng is not None and self.epoch_order_at_begin:
            # The epoch's batch order (a PyDataset's `shuffle`) is drawn from Python's RNG once
            # the epoch's data starts, just after this: as it was when the epoch first began.
            _set_python_rng(saved_rng)
        self._python_rng_epoch = list(random.getstate())

    def on_train_batch_end(self, batch, logs=None):
        # The hot path: memory only. Progress is written by the reporter's heartbeat thread and
        # `control/stop` is read by the session's polling thread; here only flags are checked.
        s = self.session
        self.step += steps_per_execution(self.model)
        self.batch_in_epoch = batch + 1
        if self._metrics_pending is not None:
            self._add_saved_metrics()
        first_nan = s.reporter.step_done(self.step, logs.get("loss") if logs else None, self.epoch)
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
        last_of_epoch = self.steps_per_epoch is not None and self.batch_in_epoch >= self.steps_per_epoch
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
                self._save(reason="interval")

    def on_epoch_end(self, epoch, logs=None):
        metrics = {k: _num(v) for k, v in (logs or {}).items()}
        self.session.reporter.progress(force=True, metrics=metrics, metrics_step=self.step, epoch=epoch + 1)
        if self.session.is_chief:  # every epoch's metrics, in order (a sweep's pruner reads them all)
            self.session.reporter.event("epoch_end", f"epoch {epoch + 1} ended at step {self.step}",
                                        epoch=epoch + 1, step=self.step, metrics=metrics)
        self.session.last_metrics = metrics
        if self.session.config.export and self.session.is_chief:
            # The weights these metrics describe: a `target_metric` stop exports them, not the
            # later ones it stops at (runtime/main.py). Two epochs, as the stop can come after the next.
            end = (self.step, metrics, self.model.get_weights())
            self.session.epoch_ends = [*self.session.epoch_ends[-1:], end]
            if any(_target_met(t, metrics) for t in self.session.config.export.get("targets") or ()):
                # The stop reaches us some epochs later (heartbeat, controller tick): keep several.
                self.session.target_ends = [*self.session.target_ends[-(TARGET_ENDS_KEPT - 1):], end]
        self.epoch, self.batch_in_epoch = epoch + 1, 0  # the epoch is complete, its end work included
        deferred, self._at_epoch_end = self._at_epoch_end, None
        s = self.session
        self._check_stop()  # a notice during validation stops here, after the epoch's end
        if deferred == "stop" or (s.stop.target is not None and self.step >= s.stop.target):
            self._stop_now()
        if deferred == "interval" or self._due():
            self._save(reason="interval")

    def on_train_end(self, logs=None):
        # Always: callbacks' train-end work (EarlyStopping's best weights) changes the state.
        self.calls.finish(self.step - self.calls.base_step)
        self._save(reason="end", call_done=True)
        self.session.watcher.in_training = False

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
        self._save(reason="stop" if stopped else (s.stop.reason or "notice"))
        s.reporter.progress(force=True, phase=Phase.STOPPED if stopped else Phase.PREEMPTED)
        raise Preempted(s.stop.code)

    # -- helpers ----------------------------------------------------------------------------

    def _add_saved_metrics(self) -> None:
        """After the resumed epoch's first batch: add the checkpoint's running sums to the metrics.

        Keras builds compiled metrics at the first step, so they exist only now; their
        accumulators are sums, and `batch + saved` is the uninterrupted `saved + batch`.
        """
        pending, self._metrics_pending = self._metrics_pending, None
        if pending is None or not restore_metrics(self.model, pending):
            self.session.reporter.event("metrics_not_restored", "the epoch's running metrics do not match "
                                        "the checkpoint's; this epoch's logged means cover only the resumed "
                                        "batches")

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

    def _save(self, reason: str, call_done: bool = False) -> None:
        if not self.session.is_chief:  # the chief alone writes checkpoints (same weights)
            self._last_save_t, self._last_save_step = time.perf_counter(), self.step
            return
        epoch, batch = self._position()
        meta = {
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
        s = self.session
        s.reporter.progress(force=True, phase=Phase.SAVING)
        arrays = capture(self.model)
        if not _finite(arrays):
            self._skip_save(reason)
            return
        arrays["callbacks"], left_out = callback_state.capture(self.watched)
        self._warn_left_out(left_out)
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

    def _warn_left_out(self, left_out: dict[str, list[str]]) -> None:
        """Name, once per callback class, the attributes that could not be saved."""
        for name, attrs in left_out.items():
            if name in self._warned_left_out:
                continue
            self._warned_left_out.add(name)
            self.session.reporter.event(
                "callback_state_partial",
                f"callback {name}: attributes {attrs} cannot be pickled and are not checkpointed; give "
                f"{name} get_state()/set_state() to save what it needs (docs/resume.md)",
                callback=name, attributes=attrs)

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


def steps_per_execution(model) -> int:
    """Batches per call of the model's train function: Keras 3's int, Keras 2's variable (None uncompiled: 1)."""
    value = model.steps_per_execution
    if value is None:
        return 1
    return int(value.numpy()) if hasattr(value, "numpy") else int(value)


def _finite(arrays: dict[str, np.ndarray]) -> bool:
    """Whether every array holds only finite values (integer arrays always do)."""
    return all(np.isfinite(a).all() for a in arrays.values())


def _target_met(target: dict, metrics: dict) -> bool:
    """The controller's `target_metric` check (controller/rules/checks.py) on one epoch's metrics."""
    value = metrics.get(target["metric"])
    if value is None:
        return False
    return value >= target["value"] if target["mode"] == "max" else value <= target["value"]


def _num(value):
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def restore_callbacks(session: Session, watched: list, arrays: dict[str, np.ndarray]) -> None:
    if "callbacks" not in arrays:
        return
    mismatched = callback_state.restore(watched, arrays["callbacks"])
    if mismatched:
        session.reporter.event("callback_state_mismatch", f"callbacks {mismatched} differ from the checkpoint's "
                               "(the script's callbacks changed); they start afresh", callbacks=mismatched)
