"""Unmodified custom loops: steps, checkpoints and notices at each `optimizer.apply`.

A script with its own `tf.GradientTape` loop calls `optimizer.apply(grads, variables)` or
`optimizer.apply_gradients(zip(grads, variables))` (which calls `apply`) once per step. The
runtime wraps Keras 3's `BaseOptimizer.apply` for the rest of the process (on Keras 2, the
`apply_gradients` of its optimizers and of the legacy ones: `install_keras2`); after each apply
outside `fit` and `spotfit.loop` it drives the same `SpotfitCallback` that `spotfit.loop` drives
(custom_loop.py): progress, periodic saves, holds for `--preempt-at`, stop requests, and on a
notice a save followed by the "preempted" exit. Inside a `tf.function` the step's work runs in
a `tf.py_function` that waits for reads of every variable the update wrote; a `Preempted` raised
there reaches the script as a TensorFlow error, which `stop_code()` lets the runtime turn back
into the exit.

The loop's unit is the optimizer. The first apply of an optimizer begins a loop (one more "fit
call" of the job, fit_calls.py); the previous loop ends there, at a `fit` or `spotfit.loop`
call, or when the script ends. Its model: the Keras model whose trainable variables are
exactly the applied ones, else the smallest model holding them all; its `optimizer` is set to
the applying one when it has none. What is not supported is reported once and then left
alone: no such model, a model compiled with another optimizer, several optimizers taking
turns (a GAN), steps inside `jit_compile=True` functions or on several replicas.

On resume the script runs from its start, so its loop draws its data again from the first
batch: a loop that ended before the checkpoint runs again and then ends with its recorded end
state; the resumed loop runs again up to the checkpoint's step and the checkpoint is restored
there (model and optimizer variables, RNG state), after which the steps count on.

A script that restores its own checkpoint (`tf.train.CheckpointManager` in its folder, which the
next local attempt finds) starts its loop past step 0: its optimizer's `iterations` before the
loop's first apply (when no `fit` or earlier loop of this process counted them) is where its loop
is. spotfit counts from there (`script_resumed_itself`): it replays only from there to its own
checkpoint when that is further on, and when the script's checkpoint is the newer one it keeps
the script's state and counts on (going back would leave the script's data position ahead of
its weights).
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from spotfit.attempt.progress import Phase
from spotfit.runtime.preemption import Preempted

if TYPE_CHECKING:
    from spotfit.runtime.checkpoint import Checkpoint
    from spotfit.runtime.instrument import SpotfitCallback
    from spotfit.runtime.session import Session

_keras3_apply: list[tuple[Any, Any]] = []  # Keras 3's BaseOptimizer and its own `apply`, once asked for


def _keras3() -> tuple[Any, Any]:
    """Keras 3's `BaseOptimizer` and its original `apply`, imported when first needed (a Keras 2 attempt never
    needs them, and does not load Keras 3)."""
    if not _keras3_apply:
        from spotfit.runtime.keras_internals import base_optimizer

        _keras3_apply.append((base_optimizer.BaseOptimizer, base_optimizer.BaseOptimizer.apply))
    return _keras3_apply[0]


def __getattr__(name: str) -> Any:
    """`_BaseOptimizer` and `_original_apply`, Keras 3's, loaded on first use (PEP 562)."""
    if name == "_BaseOptimizer":
        return _keras3()[0]
    if name == "_original_apply":
        return _keras3()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class _Loop:
    """One optimizer's stretch of steps: `fresh`, `resume` (replaying up to the checkpoint) or `skip`."""

    optimizer: Any
    model: Any
    role: str
    checkpoint: Checkpoint | None = None
    applied: int = 0  # applies seen in this loop, replayed ones included
    callback: SpotfitCallback | None = None


class ApplyHook:
    """The state of instrumented applies in this process (one per session).

    `model_class` and `callback_class`: the Keras version's `Model` and main callback (Keras 3's by
    default; Keras 2's from runtime/keras2/)."""

    def __init__(self, session: Session, model_class: type | None = None, callback_class: type | None = None):
        self.session = session
        self.model_class = model_class
        self.callback_class = callback_class
        self.loop: _Loop | None = None
        self.seen: set[int] = set()  # optimizers that drove a loop in this process
        self.unsupported: set[str] = set()  # reasons already reported
        self.disabled = False
        self.depth = 0  # nested applies (LossScaleOptimizer applies its inner optimizer)
        self.code: int | None = None  # the exit a Preempted inside a tf.function asked for
        self.trained_by_fit: set[int] = set()  # optimizers `fit` or `spotfit.loop` applied: their steps counted

    def passive(self) -> bool:
        """Inside `fit`/`spotfit.loop` (their own callback counts), a nested apply, or switched off."""
        driving = self.loop is not None and self.loop.callback is not None
        return self.disabled or self.depth > 0 or (self.session.watcher.in_training and not driving)

    def after_apply(self, optimizer, variables: list) -> None:
        """One step of the script's loop has been applied (eagerly, or from inside a graph)."""
        if self.disabled or self.code is not None:
            return
        loop = self.loop
        if loop is None or loop.optimizer is not optimizer:
            if id(optimizer) in self.seen:
                self._unsupported("interleaved", "several optimizers take turns (e.g. a GAN): steps are no "
                                  "longer counted nor checkpointed; use spotfit.loop", disable=True)
                return
            self.finish()
            loop = self._begin(optimizer, variables)
            if loop is None:
                return
        loop.applied += 1
        if loop.role == "skip":
            return
        if loop.callback is None:  # replaying the steps before the checkpoint
            if loop.applied >= int(loop.checkpoint.meta["batch"]):  # type: ignore[union-attr]
                loop.callback = self._callback(loop, loop.checkpoint)  # restores it
            return
        try:
            loop.callback.on_train_batch_end(loop.applied - 1)  # may save, and raise Preempted
        except Preempted as exc:
            self.code = int(exc.code or 0)
            raise

    def finish(self) -> None:
        """The current loop ends (another begins, `fit` or `spotfit.loop` is called, the script ended)."""
        loop, self.loop = self.loop, None
        if loop is None:
            return
        if loop.callback is not None:
            loop.callback.on_train_end()  # the end save; the call's record for a later resume
            return
        if loop.role == "skip":
            _skip(self.session, loop)

    # -- helpers ----------------------------------------------------------------------------

    def _begin(self, optimizer, variables: list) -> _Loop | None:
        s = self.session
        model = find_model(variables, self.model_class)
        if model is None:
            self._unsupported("no_model", "no Keras model holds the variables an optimizer applies: its steps "
                              "are not counted nor checkpointed")
            return None
        if getattr(model, "optimizer", None) is None:  # an uncompiled model has none
            model.optimizer = optimizer  # what the checkpoint saves with the model's variables
        elif model.optimizer is not optimizer:
            self._unsupported("other_optimizer", f"model {model.name!r} is compiled with another optimizer than "
                              "the one its loop applies: its steps are not counted nor checkpointed")
            return None
        own = self._own_start(optimizer)
        self.seen.add(id(optimizer))
        start = s.calls.begin()
        loop = _Loop(optimizer, model, start.role, start.checkpoint, applied=own)
        self.loop = loop
        if own:
            s.reporter.event("script_resumed_itself", f"loop {s.calls.index} starts at the script's own iteration "
                             f"{own} (it restored its own checkpoint): spotfit counts its steps from there, and "
                             "replays to its own checkpoint only where that is further on", own_iterations=own,
                             fit_index=s.calls.index)
        if start.role == "fresh":
            loop.callback = self._callback(loop, None, own)
        elif start.role == "resume":
            at = int(start.checkpoint.meta["batch"])  # type: ignore[union-attr]
            if own >= at:  # its own checkpoint is newer than spotfit's: going back would lose its data position
                loop.callback = self._callback(loop, None, own)
                return loop
            s.reporter.progress(force=True, phase=Phase.REPLAYING, step=s.calls.base_step + own)
            start_words = f"its steps {own + 1} to {at}" if own else f"its first {at} steps"
            s.reporter.event("replaying", f"loop {s.calls.index} runs {start_words} again to reach the checkpoint "
                             f"at step {start.checkpoint.meta['step']}: an unmodified loop draws its data from "  # type: ignore[union-attr]
                             "where the script starts it (docs/resume.md)", fit_index=s.calls.index,
                             steps=at - own, replayed=at - own)
        return loop

    def _own_start(self, optimizer) -> int:
        """The iterations the script's optimizer had before this loop's first apply, when spotfit did not count
        them: the script restored its own checkpoint (`tf.train.CheckpointManager`, `load_weights`). 0 otherwise."""
        if id(optimizer) in self.trained_by_fit or id(optimizer) in self.seen:
            return 0
        try:
            own = int(optimizer.iterations.numpy()) - 1  # this apply's is counted by the loop
        except Exception:  # noqa: BLE001 — an optimizer without a readable count: nothing to learn
            return 0
        return max(own, 0)

    def _callback(self, loop: _Loop, checkpoint: Checkpoint | None, own: int = 0) -> SpotfitCallback:
        """The loop's callback (restoring `checkpoint`); `own`: steps the script's loop had done before it
        started here, from its own checkpoint, which the count starts after."""
        from spotfit.runtime import instrument

        s = self.session
        s.model = loop.model
        callback = (self.callback_class or instrument.SpotfitCallback)(s, checkpoint, watched=[])
        callback.set_model(loop.model)
        callback.set_params({"steps": None, "epochs": 1, "verbose": 0})  # one "epoch" of unknown length
        first = not s.calls.trained_here
        if own:
            s.calls.trained_here = True  # where the attempt began is said below, at the script's own step
        callback.on_train_begin()
        if own:
            callback.step += own
            callback._last_save_step = callback.step
            callback._holds = [at for at in callback._holds if at > callback.step]
            s.reporter.progress(force=True, phase=Phase.TRAINING, step=callback.step)
            if first:
                s.reporter.event("started", f"trains from step {callback.step} (loop {s.calls.index}): the script's "
                                 f"own checkpoint is at its iteration {own}", step=callback.step,
                                 fit_index=s.calls.index)
        return callback

    def _unsupported(self, reason: str, message: str, disable: bool = False) -> None:
        if disable:
            self.finish()
            self.disabled = True
        if reason not in self.unsupported:
            self.unsupported.add(reason)
            self.session.reporter.event("custom_loop_unsupported", message, reason=reason)


def _skip(session: Session, loop: _Loop) -> None:
    """A loop that ended before the checkpoint ran again: it ends with its recorded state."""
    from spotfit.runtime import model_state

    index = session.calls.index
    if loop.checkpoint is None:
        session.reporter.event("fit_skipped", f"loop {index} finished before the checkpoint; its end state was "
                               "not recorded, the next call restores the checkpoint")
        return
    model_state.restore(loop.model, loop.checkpoint.arrays, loop.checkpoint.meta)
    session.model = loop.model
    session.reporter.progress(step=loop.checkpoint.meta["step"])
    step = loop.checkpoint.meta["step"]
    session.reporter.event("fit_skipped", f"loop {index} finished before the checkpoint: ran again "
                           f"({loop.applied} steps), then restored its end state at step {step}",
                           fit_index=index, step=step, replayed=loop.applied)


def find_model(variables: list, model_class: type | None = None) -> Any:
    """The model (a `model_class`, Keras 3's `Model` by default) whose trainable variables are exactly
    `variables`, else the smallest that holds them all.

    Of models holding the same variables, the outer one: a `Sequential` rather than the functional
    model it keeps inside, a wrapper model rather than the model it holds as an attribute.
    """
    if model_class is None:
        import keras

        model_class = keras.Model
    wanted = {id(v) for v in variables}
    candidates: list[tuple[int, Any]] = []  # (variables held, model)
    for obj in gc.get_objects():
        if not isinstance(obj, model_class):
            continue
        model: Any = obj
        try:
            held = {id(v) for v in model.trainable_variables}
        except Exception:  # noqa: BLE001 — a half-built model of the script's: not the one training
            continue
        if wanted <= held:
            candidates.append((len(held), model))
    if not candidates:
        return None
    size = min(n for n, _ in candidates)
    smallest = [m for n, m in candidates if n == size]
    inner = {id(v) for m in smallest for v in vars(m).values() if isinstance(v, model_class)}
    return next((m for m in smallest if id(m) not in inner), smallest[0])


_hook: list[ApplyHook] = []


def _in_xla() -> bool:
    from tensorflow.python.ops import control_flow_util

    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def _apply(self, grads, trainable_variables=None):
    original_apply = _keras3()[1]
    hook = _hook[0] if _hook else None
    if hook is None or hook.passive():
        if hook is not None and hook.depth == 0:
            hook.trained_by_fit.add(id(self))  # (traced once in a tf.function: not on the hot path)
        return original_apply(self, grads, trainable_variables)
    hook.depth += 1
    try:
        result = original_apply(self, grads, trainable_variables)
    finally:
        hook.depth -= 1
    if len(grads) == 0:
        return result
    variables = list(self._trainable_variables if trainable_variables is None else trainable_variables)
    _after(hook, self, variables, [*variables, *self.variables])
    return result


def _after(hook: ApplyHook, optimizer, variables: list, written: list) -> None:
    """After an apply outside `fit`: the loop's step, eagerly or from inside the graph (`written`:
    what the update wrote, which the step's work must see written)."""
    if tf.distribute.has_strategy() and tf.distribute.get_strategy().num_replicas_in_sync > 1:
        hook._unsupported("replicas", "steps applied on several replicas (`strategy.run`) are not counted nor "
                          "checkpointed; use spotfit.loop")
    elif not tf.inside_function():
        hook.after_apply(optimizer, variables)
    elif _in_xla():
        hook._unsupported("xla", "steps inside a `jit_compile=True` function are not counted nor checkpointed "
                          "(a py_function cannot run in XLA)")
    else:
        def step():
            hook.after_apply(optimizer, variables)
            return []

        # The step's work saves (or, on resume, restores) these variables from Python, on another
        # thread: it must run once the update has written them. A py_function touches no resource,
        # so automatic control dependencies alone do not order it after the assignments; reads of
        # every written variable do (they follow the writes), and the py_function waits for them.
        with tf.control_dependencies([tf.convert_to_tensor(v) for v in written]):
            tf.py_function(step, [], [])


def _wrap_apply_gradients(original):
    """Keras 2's `apply_gradients(grads_and_vars, ...)` (its optimizers, and the legacy ones), instrumented
    as Keras 3's `apply` is: each call outside `fit` is a step of the script's loop."""
    from spotfit.runtime.model_state import optimizer_variables

    @functools.wraps(original)
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        hook = _hook[0] if _hook else None
        if hook is None or hook.passive():
            if hook is not None and hook.depth == 0:
                hook.trained_by_fit.add(id(self))
            return original(self, grads_and_vars, *args, **kwargs)
        pairs = list(grads_and_vars)  # often a `zip`: read once
        hook.depth += 1
        try:
            result = original(self, pairs, *args, **kwargs)
        finally:
            hook.depth -= 1
        variables = [v for g, v in pairs if g is not None]
        if variables:
            _after(hook, self, variables, [*variables, *optimizer_variables(self)])
        return result

    return apply_gradients


def install(session: Session) -> None:
    """Instrument `apply` for the rest of this process (called by `fit_wrapper.install`)."""
    _hook[:] = [ApplyHook(session)]
    base, original_apply = _keras3()
    base.apply = functools.wraps(original_apply)(_apply)  # the markers Keras reads on it kept
    _relay_sigterm()


def install_keras2(session: Session, model_class: type, callback_class: type, optimizer_classes: tuple) -> None:
    """Instrument Keras 2's `apply_gradients` on `optimizer_classes` (runtime/keras2/fit.py)."""
    _hook[:] = [ApplyHook(session, model_class, callback_class)]
    for cls in optimizer_classes:
        cls.apply_gradients = _wrap_apply_gradients(cls.apply_gradients)
    _relay_sigterm()


def finish() -> None:
    """End the current instrumented loop, if any (before `fit`, `spotfit.loop`, and when the script ends)."""
    if _hook:
        _hook[0].finish()


def stop_code() -> int | None:
    """The exit code of a stop raised inside a `tf.function` step (it reaches the script as a TF error)."""
    return _hook[0].code if _hook else None


def _relay_sigterm() -> None:
    """Set the notice from any thread: a step in a graph runs its py_function off the main thread,
    where a hold waits for the notice while Python's own handler cannot run until the step ends."""
    if threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    if previous != -1:  # an earlier install's relay, or an event loop's: leave it in place
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return

    def relay():
        while True:
            for number in os.read(read_fd, 64):
                if number == signal.SIGTERM and _hook:  # the current session's (tests install several)
                    watcher = _hook[0].session.watcher
                    watcher.source = watcher.source or "SIGTERM"
                    watcher.notice.set()

    threading.Thread(target=relay, name="spotfit-sigterm-relay", daemon=True).start()
