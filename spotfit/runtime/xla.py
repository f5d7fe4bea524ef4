"""XLA: whether the train step is compiled with `jit_compile`, decided by measurement.

`training.xla`: `on`, `off`, or `auto`. By default `auto` leaves the script's `jit_compile`
alone and only offers XLA when a copy of the model measured faster with it (offer.py); what
follows is `auto` with `training.auto_apply: true`, for a model whose script passed no
`jit_compile` (one that did keeps it; `on`/`off` win over it, choices.py).

Auto measures on the job's own training steps: the
first `PHASE_STEPS` steps of the first `fit` run without XLA (after `mixed_precision: auto` has
measured, if it does), the next `PHASE_STEPS` with it, and the faster setting is kept for the
rest of the job. Each phase's first step (tracing, XLA compilation) is left out of the timing;
the times are the median of the others, measured from batch begin to batch end (epoch-end work
such as validation is not counted). The XLA phase runs only when affordable (trial.py: its
predicted cost, an XLA compilation of about `COMPILE_FACTOR` first steps plus the phase's steps,
under 0.5% of the job); otherwise XLA stays off and the step traced without it is kept (no
retrace), as in the plain script. The choice, both timings, what the trial took (`trial_s`) and
its predicted cost (`predicted_s`) are recorded as an `xla` event and in `tuning/xla.json` under
the job's prefix, which later attempts reuse, so a resumed job does not measure again.

Auto does not measure, and decides from the hardware like Keras's own `jit_compile="auto"`
(on with a GPU, off on a CPU), when the choice must not depend on timing noise or on the
worker: with `training.deterministic: true` (two runs must take the same numeric path) and
under a distribution strategy (every replica must compile the same step; Keras disables XLA
under `tf.distribute` for the same reason). `on` is honoured in both cases.

If the XLA step fails to compile, whether XLA is on by `on`, by the hardware or during the
measurement, the job goes on without XLA and the failure is an `xla_failed` event (the batch of
the failed call may be skipped). For example `xla: "on"` under `MirroredStrategy` can fail with
`InvalidArgumentError ... tfvariable_on_a_different_device`. The guard wraps only a `fit`
call's first step: once a step has run, the plain compiled function takes its place.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import keras

from spotfit.attempt import layout
from spotfit.errors import NotFoundError
from spotfit.runtime import trial

PHASE_STEPS = 11  # per phase: 1 untimed (trace/compile) + 10 timed; fewer were noisy here
# An XLA compilation costs this many times the fit call's first step (tracing included): the
# small conv net of bench/step_script.py compiled in 2.1x (float32) and 3.4x (bf16) its first
# step on this project's 2-core CPU, and the epoch's last, smaller batch compiles once more (in
# sample, one run each): 6 covers both compilations.
COMPILE_FACTOR = 6.0
TUNING_KEY = layout.tuning("xla")


def decide(off_step_s: float | None, on_step_s: float | None) -> bool:
    """Keep XLA when it measured faster (pure).

    >>> decide(0.010, 0.008), decide(0.010, 0.012), decide(0.010, None)
    (True, False, False)
    """
    return off_step_s is not None and on_step_s is not None and on_step_s < off_step_s


def without_measuring(has_gpu: bool, deterministic: bool, distributed: bool) -> tuple[bool | None, str]:
    """(choice, why) of `auto` where it must not measure; (None, "") where it measures (pure).

    >>> without_measuring(has_gpu=False, deterministic=False, distributed=False)
    (None, '')
    >>> without_measuring(has_gpu=True, deterministic=True, distributed=False)[0]
    True
    """
    if distributed:
        return False, "auto under a distribution strategy: every replica must compile the same step"
    if deterministic:
        device = "a GPU" if has_gpu else "no GPU"
        return has_gpu, f"auto with training.deterministic: decided from the hardware ({device}), not by timing"
    return None, ""


class XlaTuner(keras.callbacks.Callback):
    """Applies `training.xla` to each `fit` call and, for `auto`, measures and decides once.

    One tuner serves the whole attempt. `before_fit(model)` sets `jit_compile` before each `fit`
    builds its train function; the tuner is a callback only of a `fit` call that starts
    measuring (`measuring`), so a decided setting costs nothing per step.
    """

    def __init__(self, mode: str, store, reporter, fixed: bool | None = None, why: str = "", after=None):
        """`fixed`: for `auto`, the choice to make without measuring (None: measure).

        `after`: a tuner (with `measuring`) whose measurement comes first; this one waits for it.
        """
        super().__init__()
        self.after = after
        self._first_step_s: float | None = None  # the measuring fit call's first step (tracing included)
        self._steps = 0
        self._t_trial = 0.0
        self._predicted_s: float | None = None  # the trial's predicted cost, once the phase without XLA measured
        self.mode = mode
        self.store = store
        self.reporter = reporter
        self.choice: bool | None = None
        self.timings: dict[str, list[float]] = {"off": [], "on": []}
        self._phase: str | None = None
        self._compiled = False  # the phase's first step (tracing, compilation) has run
        self._functions: dict[bool, Callable] = {}
        self._t_begin = 0.0
        if mode in ("on", "off"):
            self._settle(mode == "on", "set in the job spec")
        elif fixed is not None:
            self._settle(fixed, why)
        else:
            saved = self._load()
            if saved is not None:
                self.choice = saved["choice"] == "on"
                reporter.event("xla", f"XLA {saved['choice']}: measured by an earlier attempt", reused=True,
                               **{k: saved.get(k) for k in ("choice", "off_step_s", "on_step_s")})

    @property
    def measuring(self) -> bool:
        return self._phase is not None

    def before_fit(self, model) -> None:
        """Set the model's `jit_compile` before `fit` builds its train function.

        With XLA on, the train function is built here, guarded: `fit` keeps it, and a compile
        failure at its first step falls back to training without XLA.
        """
        if self.choice is not None:
            _set_jit(model, self.choice)
            if self.choice and not isinstance(model.train_function, _GuardedFunction):
                model.train_function = _guarded(_rebuilt(model), self, model, once=True)
        else:
            self._phase, self._compiled = "off", False
            _set_jit(model, False)

    # -- Keras hooks (a measuring fit call only) --------------------------------------------

    def on_train_batch_begin(self, batch, logs=None):
        if self._phase is not None:
            self._t_begin = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self._phase is None:
            return
        model = self.model
        self._steps += model.steps_per_execution
        seconds = (time.perf_counter() - self._t_begin) / max(model.steps_per_execution, 1)
        if self._first_step_s is None:
            self._first_step_s = seconds
        if self.after is not None and self.after.measuring:
            return  # the precision trial first; its last step retraced, so the next is untimed here
        if not self._compiled:
            self._compiled = True  # the phase's first step: tracing and compilation, not timed
        else:
            self.timings[self._phase].append(seconds)
        if len(self.timings[self._phase]) < PHASE_STEPS - 1:
            return
        if self._phase == "off":
            step_s = statistics.median(self.timings["off"])
            cost_s = self._predicted_s = trial.predicted_cost_s(self._first_step_s, step_s, PHASE_STEPS, COMPILE_FACTOR)
            left = trial.steps_left(self.params, self._steps, getattr(model, "_initial_epoch", None) or 0)
            if not trial.affordable(cost_s, step_s, left):
                self._finish(model, skipped=f"a trial would cost ~{cost_s:.2f} s, more than "
                                            f"{trial.budget_share():.1%} of the ~{(left or 0) * step_s:.0f} s left")
                return
            self._t_trial = time.perf_counter()
            self._functions[False] = model.train_function
            _set_jit(model, True)
            if not model.jit_compile:  # Keras found a layer that XLA cannot compile
                self._finish(model)
                return
            model.train_function = _guarded(_rebuilt(model), self, model)
            self._phase, self._compiled = "on", False
        else:
            self._finish(model)

    def on_train_end(self, logs=None):
        if self._phase is not None:  # training ended inside the measurement
            self._finish(self.model)

    def failed(self, model, exc: Exception) -> Callable:
        """The XLA step failed to compile: fall back to the measured (or a new) non-XLA function."""
        self.reporter.event("xla_failed", f"XLA compilation failed, training goes on without it: "
                            f"{type(exc).__name__}: {_reason(exc)}", error=f"{type(exc).__name__}: {str(exc)[-800:]}")
        if self._phase is not None:
            self.timings["on"] = []
            self._finish(model)
            return self._functions.get(False) or _rebuilt(model)
        self.choice = False
        _set_jit(model, False)
        model.test_function = model.predict_function = None  # rebuilt without XLA when next needed
        self.reporter.event("xla", "XLA off: compilation failed", choice="off", off_step_s=None, on_step_s=None,
                            reason="compilation failed")
        return _rebuilt(model)

    # -- helpers ---------------------------------------------------------------------------

    def _finish(self, model, skipped: str = "") -> None:
        off = statistics.median(self.timings["off"]) if self.timings["off"] else None
        on = statistics.median(self.timings["on"]) if self.timings["on"] else None
        trial_s = time.perf_counter() - self._t_trial if self._t_trial else 0.0
        self._phase = None
        choice = decide(off, on)
        if not choice and False in self._functions:  # the XLA phase ran: back to the function measured without it
            _set_jit(model, False)
            model.train_function = self._functions[False]
        elif isinstance(model.train_function, _GuardedFunction):
            model.train_function = model.train_function.function
        self.choice = choice
        doc = {"choice": "on" if choice else "off", "off_step_s": off, "on_step_s": on, "trial_s": round(trial_s, 4),
               "predicted_s": self._predicted_s,
               "steps_measured": {k: len(v) for k, v in self.timings.items()}, "reason": skipped or "measured"}
        self.store.write_bytes(TUNING_KEY, json.dumps(doc).encode())
        message = f"XLA off: not measured: {skipped}" if skipped else _message(choice, off, on)
        self.reporter.event("xla", message, **doc)

    def _settle(self, choice: bool, why: str) -> None:
        self.choice = choice
        self.reporter.event("xla", f"XLA {'on' if choice else 'off'}: {why}", choice="on" if choice else "off",
                            off_step_s=None, on_step_s=None, reason=why)

    def _load(self) -> dict | None:
        try:
            return json.loads(self.store.read_bytes(TUNING_KEY))
        except (NotFoundError, ValueError):
            return None


class _GuardedFunction:
    """An XLA train function whose compile failure falls back; `once`: unwraps itself after a step."""

    def __init__(self, function: Callable, tuner: XlaTuner, model, once: bool = False):
        self.function, self.tuner, self.model, self.once = function, tuner, model, once

    def __call__(self, iterator):
        try:
            logs = self.function(iterator)
        except Exception as exc:  # noqa: BLE001 (XLA compile errors have no common type; falls back)
            fallback = self.tuner.failed(self.model, exc)
            self.model.train_function = fallback
            return fallback(iterator)
        if self.once and self.model.train_function is self:
            self.model.train_function = self.function  # compiled and ran: no wrapper on later steps
        return logs


def _guarded(function: Callable, tuner: XlaTuner, model, once: bool = False) -> _GuardedFunction:
    return _GuardedFunction(function, tuner, model, once)


def _reason(exc: Exception) -> str:
    """The line of a TensorFlow error that says what went wrong (its message ends with it, after the trace)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reasons = [line for line in lines
               if not line.startswith(("File ", "Detected at node", "Graph execution error", "[[", "Cf. "))]
    return (reasons or lines or [""])[-1][:300]


def _rebuilt(model) -> Callable:
    """The model's train function, built anew for its current `jit_compile`."""
    model.make_train_function(force=True)
    return model.train_function


def _set_jit(model, on: bool) -> None:
    if bool(model.jit_compile) != on:
        model.jit_compile = on
        model.train_function = None  # rebuilt by the next `fit` with the new setting


def _message(choice: bool, off: float | None, on: float | None) -> str:
    def ms(v):
        return "n/a" if v is None else f"{v * 1000:.2f} ms/step"

    return f"XLA {'on' if choice else 'off'}: {ms(on)} with jit_compile, {ms(off)} without (measured)"
