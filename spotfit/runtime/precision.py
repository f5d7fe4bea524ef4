"""Mixed precision: which Keras dtype policy an attempt trains under, decided from the hardware.

`training.mixed_precision`: `off` (float32), `mixed_float16`, `mixed_bfloat16`, or `auto`.
By default `auto` applies nothing: the script's own policy runs, and the pick below is measured
on a copy of the model and offered (offer.py, choices.py). With `training.auto_apply: true`
`auto` applies it, unless the script sets a policy itself:

- a GPU of compute capability >= 8.0 (A100, L4, H100, ...): `mixed_bfloat16` (tensor cores
  run bf16 as fast as fp16, and bf16 needs no loss scaling);
- a GPU of compute capability 7.x (V100, T4): `mixed_float16` (tensor cores; Keras wraps the
  optimizer in a `LossScaleOptimizer`);
- older GPUs: `off`;
- a CPU with bf16 instructions (AVX512-BF16, or AMX-BF16 on Sapphire Rapids and later), where
  oneDNN runs bf16 matmuls and convolutions natively: `mixed_bfloat16` (on this project's
  AVX512-BF16 CPU: a conv net's step x0.35-x0.75, an MLP's x0.72-x1.43 in runs so far, docs/benchmarks.md);
- any other CPU: `off`. `mixed_float16` on a CPU is emulated (a conv net's step x6.9-x12.6 here,
  up to ~80x elsewhere), so auto never picks it on a CPU.

The hardware's pick is only a candidate: `auto` then measures it against float32 on the
job's own steps (`PrecisionTuner`, as `xla: auto` does), because bf16 made one model's step
x1.43 slower on this project's CPU. The model is built under the candidate policy (so Keras
adds loss scaling for fp16), then every layer runs float32 for the first `PHASE_STEPS` steps of
the first `fit`, the candidate for the next `PHASE_STEPS` (each phase's first step, a retrace,
untimed), and the faster is kept. The variables are float32 either way, so switching costs a
retrace and nothing else. The trial runs only when it is affordable (trial.py: under 0.5% of
the job); otherwise the job trains in float32, as its plain script would. The choice, both
medians, `trial_s` and the predicted cost `predicted_s` are a `precision` event and
`tuning/precision.json`, which later attempts reuse. Auto
does not measure with `training.deterministic: true` or under a distribution strategy (the
choice must not depend on timing, and every replica must run the same policy): the hardware
decides there.

A policy spotfit sets is set before the user's script builds its model, and the model's output layers
are kept in float32 (`keep_outputs_float32`), as the Keras mixed-precision guide asks, so that
softmax and losses stay numerically safe and predictions come out as float32.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import keras

from spotfit.attempt import layout
from spotfit.errors import NotFoundError
from spotfit.runtime import trial

POLICIES = ("auto", "off", "mixed_float16", "mixed_bfloat16")
PHASE_STEPS = 11  # per phase: 1 untimed (retrace) + 10 timed, as for XLA
TUNING_KEY = layout.tuning("precision")


@dataclass(frozen=True)
class Hardware:
    """What the precision decision depends on."""

    gpu_compute_capabilities: tuple[tuple[int, int], ...] = ()
    cpu_flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def cpu_bf16(self) -> bool:
        return "avx512_bf16" in self.cpu_flags or "amx_bf16" in self.cpu_flags

    @property
    def cpu_amx_bf16(self) -> bool:
        return "amx_bf16" in self.cpu_flags


def choose(requested: str, hw: Hardware) -> tuple[str, str]:
    """(policy, why): `requested` unless `auto`, which decides from `hw` (pure).

    >>> choose("auto", Hardware(cpu_flags=frozenset({"avx512_bf16"})))[0]
    'mixed_bfloat16'
    >>> choose("auto", Hardware(cpu_flags=frozenset({"avx2"})))[0]
    'off'
    >>> choose("auto", Hardware(gpu_compute_capabilities=((8, 0),)))[0]
    'mixed_bfloat16'
    """
    if requested not in POLICIES:
        raise ValueError(f"Invalid `training.mixed_precision`: received {requested!r}, expected one of {POLICIES}.")
    if requested != "auto":
        return requested, "set in the job spec"
    if hw.gpu_compute_capabilities:
        cc = min(hw.gpu_compute_capabilities)
        if cc >= (8, 0):
            return "mixed_bfloat16", f"GPU compute capability {cc[0]}.{cc[1]} >= 8.0: bf16 tensor cores"
        if cc >= (7, 0):
            return "mixed_float16", f"GPU compute capability {cc[0]}.{cc[1]}: fp16 tensor cores, no bf16"
        return "off", f"GPU compute capability {cc[0]}.{cc[1]} < 7.0: no tensor cores"
    if hw.cpu_amx_bf16:
        return "mixed_bfloat16", "CPU with AMX-BF16: native bf16 matmuls (fp16 would be emulated)"
    if hw.cpu_bf16:
        return "mixed_bfloat16", "CPU with AVX512-BF16: native bf16 dot products (fp16 would be emulated)"
    return "off", "CPU without bf16 instructions; fp16 would be emulated (many times slower)"


def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of this machine (Linux), empty elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def detect() -> Hardware:
    """This machine's GPUs (compute capability, from TensorFlow) and CPU flags."""
    import tensorflow as tf

    ccs = []
    for gpu in tf.config.list_physical_devices("GPU"):
        cc = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if cc:
            ccs.append(tuple(cc))
    return Hardware(gpu_compute_capabilities=tuple(ccs), cpu_flags=cpu_flags())


_set_global_policy = keras.mixed_precision.set_global_policy  # Keras's own: choices.py wraps the public name


def set_policy(name) -> None:
    """Set Keras's global dtype policy with Keras's own setter (not the script-watching wrapper)."""
    _set_global_policy(name)


def apply(policy: str) -> None:
    """Set Keras's global dtype policy (`off` = float32)."""
    set_policy("float32" if policy == "off" else policy)


def keep_outputs_float32(model) -> list[str]:
    """Run the model's output layers in float32; returns the names of the layers changed."""
    if keras.mixed_precision.global_policy().compute_dtype == "float32":
        return []
    changed = []
    for layer in _output_layers(model):
        if layer.dtype_policy.compute_dtype != "float32":
            layer.dtype_policy = "float32"
            changed.append(layer.name)
    return changed


def _output_layers(model) -> list:
    outputs = getattr(model, "outputs", None)
    try:
        layers = [t._keras_history.operation for t in (outputs or [])]
    except AttributeError:
        layers = []
    if not layers and getattr(model, "layers", None):
        layers = [model.layers[-1]]
    return [layer for layer in layers if hasattr(layer, "dtype_policy")]


def load_tuning(store) -> dict | None:
    """What an earlier attempt measured (`tuning/precision.json`), or None."""
    try:
        return json.loads(store.read_bytes(TUNING_KEY))
    except (NotFoundError, ValueError):
        return None


def _layers(model) -> list:
    return [layer for layer in model._flatten_layers(include_self=True, recursive=True)
            if hasattr(layer, "dtype_policy")]


def _rebuilt(model):
    model.make_train_function(force=True)
    return model.train_function


class PrecisionTuner(keras.callbacks.Callback):
    """`mixed_precision: auto` by measurement: float32 against the hardware's `candidate`, once per job.

    `before_fit(model)` switches the model to float32 for the first phase; the tuner is a
    callback only of the `fit` call that measures (`measuring`), so a decided policy costs
    nothing per step.
    """

    def __init__(self, candidate: str, why: str, store, reporter):
        super().__init__()
        self.candidate, self.why = candidate, why
        self.store, self.reporter = store, reporter
        self.choice: str | None = None
        self.timings: dict[str, list[float]] = {"off": [], candidate: []}
        self._phase: str | None = None
        self._compiled = False
        self._policies: dict[int, object] = {}  # id(layer) -> the policy the model was built with
        self._off_function = None
        self._t_begin = 0.0
        self._t_trial = 0.0
        self._first_step_s: float | None = None
        self._predicted_s: float | None = None  # the trial's predicted cost, once the float32 phase measured
        self._steps = 0

    @property
    def measuring(self) -> bool:
        return self._phase is not None

    def before_fit(self, model) -> None:
        if self.choice is not None or self._phase is not None:
            return
        self._policies = {id(layer): layer.dtype_policy for layer in _layers(model)}
        self._set(model, "float32")
        self._phase, self._compiled, self._steps = "off", False, 0

    def on_train_batch_begin(self, batch, logs=None):
        self._t_begin = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self._phase is None:
            return
        model = self.model
        self._steps += model.steps_per_execution
        seconds = (time.perf_counter() - self._t_begin) / max(model.steps_per_execution, 1)
        if not self._compiled:
            self._compiled = True  # the phase's first step: (re)tracing, not timed
            if self._first_step_s is None:
                self._first_step_s = seconds
        else:
            self.timings[self._phase].append(seconds)
        if len(self.timings[self._phase]) < PHASE_STEPS - 1:
            return
        if self._phase != "off":
            self._finish(model)
            return
        step_s = statistics.median(self.timings["off"])
        cost_s = self._predicted_s = trial.predicted_cost_s(self._first_step_s or step_s, step_s, PHASE_STEPS)
        left = trial.steps_left(self.params, self._steps, getattr(model, "_initial_epoch", None) or 0)
        if not trial.affordable(cost_s, step_s, left):
            self._finish(model, skipped=f"a trial of {self.candidate} would cost ~{cost_s:.2f} s, more than "
                                        f"{trial.budget_share():.1%} of the ~{(left or 0) * step_s:.0f} s left")
            return
        self._off_function = model.train_function
        self._set(model, None)
        model.train_function = _Guarded(_rebuilt(model), self, model)
        self._phase, self._compiled, self._t_trial = self.candidate, False, time.perf_counter()

    def failed(self, model, exc: Exception):
        """The candidate's step failed (an op mixing dtypes): back to float32, measured as the choice."""
        self.reporter.event("speedup_fallback", f"dtype policy {self.candidate} failed in the trial, training goes "
                            f"on in float32: {type(exc).__name__}: {error_line(exc)}",
                            setting="mixed_precision", applied=self.candidate, error=type(exc).__name__)
        self.timings[self.candidate] = []
        self._finish(model, skipped=f"its trial step failed ({type(exc).__name__})")  # float32, as measured before
        return model.train_function

    def on_train_end(self, logs=None):
        if self._phase is not None:  # training ended inside the measurement
            self._finish(self.model)

    def _finish(self, model, skipped: str = "") -> None:
        off = statistics.median(self.timings["off"]) if self.timings["off"] else None
        cand = statistics.median(self.timings[self.candidate]) if self.timings[self.candidate] else None
        trial_s = time.perf_counter() - self._t_trial if self._t_trial else 0.0
        tried = self._phase == self.candidate
        self._phase = None
        self.choice = self.candidate if off is not None and cand is not None and cand < off else "off"
        if self.choice == "off":
            apply("off")  # models built later run float32 too, and the model card says so
            if tried:
                self._set(model, "float32")
                model.train_function = self._off_function or _rebuilt(model)
        doc = {"policy": self.choice, "candidate": self.candidate, "off_step_s": off, "candidate_step_s": cand,
               "trial_s": round(trial_s, 4), "predicted_s": self._predicted_s,
               "steps_measured": {k: len(v) for k, v in self.timings.items()},
               "reason": skipped or f"measured; {self.why}"}
        self.store.write_bytes(TUNING_KEY, json.dumps(doc).encode())
        self.reporter.event("precision", _message(self.choice, self.candidate, off, cand, skipped), **doc)

    def _set(self, model, policy: str | None) -> None:
        """Every layer to `policy`, or back to the policy it was built with (None).

        Validation and prediction functions traced under the other policy are dropped: Keras
        traces them again, under this one, when next needed.
        """
        for layer in _layers(model):
            layer.dtype_policy = policy or self._policies.get(id(layer), layer.dtype_policy)
        model.test_function = model.predict_function = None


def error_line(exc: BaseException) -> str:
    """The last line of an error's message (TensorFlow's end with what went wrong), at most 300 characters."""
    lines = str(exc).strip().splitlines()
    return lines[-1][:300] if lines else ""


class _Guarded:
    """The candidate's train function; a failure at its first step falls back to float32."""

    def __init__(self, function, tuner: PrecisionTuner, model):
        self.function, self.tuner, self.model = function, tuner, model

    def __call__(self, iterator):
        try:
            logs = self.function(iterator)
        except Exception as exc:  # noqa: BLE001 (dtype errors have no common type; falls back)
            fallback = self.tuner.failed(self.model, exc)
            return fallback(iterator)
        if self.model.train_function is self:
            self.model.train_function = self.function  # traced and ran: no wrapper on later steps
        return logs


def _message(choice: str, candidate: str, off: float | None, cand: float | None, skipped: str) -> str:
    name = "float32" if choice == "off" else choice
    if skipped:
        return f"dtype policy {name}: not measured against {candidate}: {skipped}"

    def ms(v):
        return "n/a" if v is None else f"{v * 1000:.2f} ms/step"

    return f"dtype policy {name}: {ms(cand)} with {candidate}, {ms(off)} with float32 (measured)"
