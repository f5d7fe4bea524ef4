"""Instrumenting `keras.Model.fit` so that unmodified scripts checkpoint and resume exactly.

`install(session)` replaces `keras.Model.fit` with a wrapper that adds one callback,
`SpotfitCallback`, and arms the resuming epoch iterator (resume.py). The callback restores the
checkpoint when training begins (model, optimizer and random-layer state, NumPy and Python RNG
state), writes progress, saves periodically and on a preemption notice, and then raises
`Preempted` so that the process exits with `EXIT_PREEMPTED`.

A script may call `fit` several times (for example, frozen then fine-tuned): checkpoints
record which call they belong to, and on resume the earlier calls return at once.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import random
import time
from typing import TYPE_CHECKING

import keras
import numpy as np

from spotfit.runtime import EXIT_PREEMPTED, EXIT_STOPPED, resume
from spotfit.runtime.preemption import Preempted

if TYPE_CHECKING:
    from spotfit.runtime.session import Session

_original_fit = keras.Model.fit
_FIT_SIGNATURE = inspect.signature(_original_fit)


def weights_sha256(model: keras.Model) -> str:
    """sha256 over the model's weights in their fixed order (names, shapes, dtypes, values)."""
    h = hashlib.sha256()
    for v in model.weights:
        value = np.ascontiguousarray(keras.ops.convert_to_numpy(v.value))
        h.update(f"{v.path}:{value.dtype}:{value.shape};".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def _state_variables(model: keras.Model) -> list:
    """Everything that must come back on resume: weights, seed states, optimizer slots."""
    variables = list(model.variables)
    if model.optimizer is not None:
        variables += list(model.optimizer.variables)
    return variables


def capture(model: keras.Model) -> dict[str, np.ndarray]:
    arrays = {f"v{i:05d}": keras.ops.convert_to_numpy(v.value) for i, v in enumerate(_state_variables(model))}
    keys, pos = np.random.get_state()[1:3]
    arrays["numpy_rng_keys"] = np.asarray(keys)
    arrays["numpy_rng_pos"] = np.asarray([pos])
    return arrays


def restore(model: keras.Model, arrays: dict[str, np.ndarray], meta: dict) -> None:
    if model.optimizer is not None and not model.optimizer.built:
        # Keras builds the optimizer lazily at the first step; its slots must exist to restore.
        model.optimizer.build(model.trainable_variables)
    variables = _state_variables(model)
    saved = sorted(k for k in arrays if k.startswith("v"))
    if len(saved) != len(variables):
        raise RuntimeError(
            f"checkpoint holds {len(saved)} variables but the model and optimizer have "
            f"{len(variables)}: the script's model changed since the checkpoint was written"
        )
    for key, var in zip(saved, variables):
        var.assign(arrays[key])
    np.random.set_state(("MT19937", arrays["numpy_rng_keys"], int(arrays["numpy_rng_pos"][0]), 0, 0.0))
    if meta.get("python_rng") is not None:
        version, state, gauss = meta["python_rng"]
        random.setstate((version, tuple(state), gauss))


class SpotfitCallback(keras.callbacks.Callback):
    """Restores, reports, checkpoints and reacts to preemption notices inside one `fit` call."""

    def __init__(self, session: "Session", fit_index: int, resume_meta: dict | None, arrays=None):
        super().__init__()
        self.session = session
        self.fit_index = fit_index
        self.resume_meta = resume_meta
        self._arrays = arrays
        self.step = 0
        self.epoch = 0
        self.batch_in_epoch = 0
        self.steps_per_epoch = None
        self._last_save_t = 0.0
        self._last_save_step = 0
        self._first_step_seen = False

    # -- Keras hooks ----------------------------------------------------------------------

    def on_train_begin(self, logs=None):
        s = self.session
        self.steps_per_epoch = self.params.get("steps")
        epochs = self.params.get("epochs") or 1
        total = self.steps_per_epoch * epochs if self.steps_per_epoch else None
        if self.resume_meta is not None:
            t0 = time.perf_counter()
            restore(self.model, self._arrays, self.resume_meta)
            self._arrays = None
            self.step = self.resume_meta["step"]
            self.epoch = self.resume_meta["epoch"]
            self.model._initial_epoch = self.epoch
            restore_s = time.perf_counter() - t0 + s.load_s
            s.reporter.timing("restore_s", restore_s)
            s.reporter.event(
                "restored",
                f"resumed at step {self.step} (epoch {self.epoch}, batch {self.resume_meta['batch']})",
                step=self.step,
                restore_s=restore_s,
            )
        else:
            self.step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self._last_save_t = time.perf_counter()
        self._last_save_step = self.step
        s.reporter.progress(force=True, phase="training", step=self.step, total_steps=total)
        s.watcher.in_training = True

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        s = self.session
        self.step += self.model.steps_per_execution
        self.batch_in_epoch = batch + 1
        loss = (logs or {}).get("loss")
        if not self._first_step_seen:
            self._first_step_seen = True
            s.reporter.timing("first_step_s", time.time() - s.t_started)
            s.reporter.progress(force=True, step=self.step, loss=_num(loss), epoch=self.epoch)
        else:
            s.reporter.progress(step=self.step, loss=_num(loss), epoch=self.epoch)
        previous = self.step - self.model.steps_per_execution
        if any(previous < at <= self.step for at in s.config.hold_at_steps) and self.step > self._last_save_step:
            self._hold()
        if s.watcher.notice.is_set():
            self._save(reason=s.watcher.source or "notice")
            s.reporter.progress(force=True, phase="preempted")
            raise Preempted(EXIT_PREEMPTED)
        if s.stop_requested():
            self._save(reason="stop")
            s.reporter.progress(force=True, phase="stopped")
            raise Preempted(EXIT_STOPPED)
        if self._due():
            self._save(reason="interval")

    def on_epoch_end(self, epoch, logs=None):
        metrics = {k: _num(v) for k, v in (logs or {}).items()}
        self.session.reporter.progress(force=True, metrics=metrics, epoch=epoch + 1)
        self.session.last_metrics = metrics

    def on_train_end(self, logs=None):
        if self.step > self._last_save_step:
            self._save(reason="end")
        self.session.watcher.in_training = False

    # -- helpers ----------------------------------------------------------------------------

    def _position(self) -> tuple[int, int]:
        if self.steps_per_epoch and self.batch_in_epoch >= self.steps_per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.batch_in_epoch

    def _due(self) -> bool:
        cfg = self.session.config
        if cfg.interval_steps:
            return self.step - self._last_save_step >= cfg.interval_steps
        interval = self.session.interval_s()
        if interval is None:  # auto: the first save measures the save cost
            return True
        return time.perf_counter() - self._last_save_t >= interval

    def _save(self, reason: str) -> None:
        epoch, batch = self._position()
        meta = {
            "fit_index": self.fit_index,
            "step": self.step,
            "epoch": epoch,
            "batch": batch,
            "reason": reason,
            "attempt": self.session.config.attempt,
            "python_rng": list(random.getstate()),
        }
        s = self.session
        s.reporter.progress(force=True, phase="saving")
        seconds = s.checkpoints.save(self.step, capture(self.model), meta)
        s.record_save(seconds)
        s.reporter.progress(force=True, phase="training")
        s.reporter.event("checkpoint", f"saved step {self.step} ({reason}) in {seconds:.3f}s",
                         step=self.step, save_s=seconds, reason=reason)
        self._last_save_t = time.perf_counter()
        self._last_save_step = self.step

    def _hold(self) -> None:
        """An injected preemption: stand still at this step until the backend's signal."""
        s = self.session
        s.reporter.progress(force=True, phase="holding", step=self.step)
        s.reporter.event("hold", f"holding at step {self.step} for the injected preemption", step=self.step)
        s.watcher.notice.wait(s.config.hold_timeout_s)


def _num(value):
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def install(session: "Session") -> None:
    """Replace `keras.Model.fit` for the rest of this process."""
    resume.install()

    def fit(self, *args, **kwargs):
        bound = _FIT_SIGNATURE.bind(self, *args, **kwargs)
        call = dict(bound.arguments)
        call.pop("self")
        call.update(call.pop("kwargs", {}))
        session.fit_index += 1
        index = session.fit_index
        ckpt = session.resume_checkpoint
        if ckpt is not None and ckpt.meta["fit_index"] > index:
            session.reporter.event("fit_skipped", f"fit call {index} finished before the checkpoint")
            history = keras.callbacks.History()
            history.set_model(self)
            return history
        meta = arrays = None
        if ckpt is not None and ckpt.meta["fit_index"] == index:
            meta, arrays = ckpt.meta, ckpt.arrays
            session.resume_checkpoint = None
            resume.arm(resume.Position(epoch=meta["epoch"], batch=meta["batch"]))
        callback = SpotfitCallback(session, index, meta, arrays)
        call["callbacks"] = [*(call.get("callbacks") or []), callback]
        session.model = self
        try:
            return _original_fit(self, **call)
        finally:
            resume.disarm()
            self._initial_epoch = None
            session.watcher.in_training = False

    keras.Model.fit = fit
