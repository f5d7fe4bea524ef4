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

from spotfit.attempt.progress import Phase
from spotfit.runtime import callback_state
from spotfit.runtime.checkpoint import Checkpoint
from spotfit.runtime.fit_calls import FitCalls
from spotfit.runtime.model_state import (
    _set_python_rng,
    capture,
    restore,
    restore_metrics,
)
from spotfit.runtime.step_duties import StepDuties

if TYPE_CHECKING:
    from spotfit.runtime.session import Session

TARGET_ENDS_KEPT = 8  # epoch ends meeting a stopping target whose weights an export may need


class SpotfitHooks(StepDuties):
    """Restores, reports, checkpoints and reacts to preemption notices inside one `fit` call.

    The hooks of the main callback, on no Keras base class: `SpotfitCallback` puts them on Keras
    3's `Callback`, runtime/keras2/ on Keras 2's (`tf_keras`), which calls them the same way.
    What spotfit does at each step is `StepDuties` (step_duties.py), shared with the hollow trainer.

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
        self._init_duties()
        self._metrics_pending: dict | None = None  # running metric sums to put back mid-epoch
        self._python_rng_epoch: list | None = None  # Python's RNG state when this epoch began
        self._warned_left_out: set[str] = set()

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
        self._begin_training(total)

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
        self.step += steps_per_execution(self.model)
        self.batch_in_epoch = batch + 1
        if self._metrics_pending is not None:
            self._add_saved_metrics()
        last_of_epoch = self.steps_per_epoch is not None and self.batch_in_epoch >= self.steps_per_epoch
        self._after_step(logs.get("loss") if logs else None, last_of_epoch)

    def on_epoch_end(self, epoch, logs=None):
        metrics = {k: _num(v) for k, v in (logs or {}).items()}
        # Written by the heartbeat thread at once: the training loop does not wait for the store at each epoch's end.
        self.session.reporter.progress(soon=True, metrics=metrics, metrics_step=self.step, epoch=epoch + 1)
        if self.session.is_chief:  # every epoch's metrics, in order (a sweep's pruner reads them all)
            self.session.reporter.event_soon("epoch_end", f"epoch {epoch + 1} ended at step {self.step}",
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
        self._after_epoch(epoch)

    def on_train_end(self, logs=None):
        self._end_call()

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

    def _save(self, reason: str, call_done: bool = False) -> None:
        s = self.session
        if not s.is_chief:  # the chief alone writes checkpoints (same weights)
            self._last_save_t, self._last_save_step = time.perf_counter(), self.step
            return
        meta = self._meta(reason, call_done)
        s.reporter.progress(force=True, phase=Phase.SAVING)
        arrays = capture(self.model)
        if not _finite(arrays):
            self._skip_save(reason)
            return
        arrays["callbacks"], left_out = callback_state.capture(self.watched)
        self._warn_left_out(left_out)
        self._write_checkpoint(arrays, meta, reason, call_done)

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
