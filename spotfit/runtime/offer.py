"""What `auto` offers without applying it: a faster dtype policy or XLA, measured on a copy of the model.

With `training.mixed_precision: auto` or `training.xla: auto` and no `training.auto_apply`,
the script trains as written, and the speed-ups it could have are measured on the side: after
the first `fit` call's first step, a copy of the model (`keras.models.clone_model`, weights
copied, a fresh optimizer of the same configuration, the same loss) trains `PHASE_STEPS` steps
on one batch of the call's data under the script's own settings, then under each candidate
(the hardware's dtype policy, `jit_compile=True`); the first step of each is untimed (tracing,
compilation). A candidate that takes under `OFFER_BELOW` (0.95) of the script's step time is
an `offer` event and an entry of the attempt's result (`spotfit status` shows it), e.g.
"mixed_bfloat16 would take 0.62x the step time: set `training.mixed_precision: mixed_bfloat16`".

Nothing the script trains is touched: the copy has its own variables, and the Python, NumPy
and Keras random states are put back after it, so the job's numerics are those of the plain
script. The trial runs only when affordable (trial.py: under the budget share of the job's
remaining time, predicted from the copy's first phase); models `clone_model` cannot copy
(subclassed ones) and data it cannot take a batch from are not measured, and the event says so.
The result is kept in `tuning/offer.json`; later attempts report it without measuring again.
A fit call too short for any trial (`trial.could_afford`: its steps left below `PHASE_STEPS` over
the budget share) is not measured at all, not even the copy under the script's own settings.
"""

from __future__ import annotations

import copy
import json
import random
import statistics
import time

import keras
import numpy as np

from spotfit.attempt import layout
from spotfit.errors import NotFoundError
from spotfit.runtime import trial

PHASE_STEPS = 11
OFFER_BELOW = 0.95  # a candidate must save 5% of the step: less is within the timing noise of 10 steps
TUNING_KEY = layout.tuning("offer")
COMPILE_FACTOR = 6.0  # an XLA compilation, in first steps (xla.py)
_NAME_UIDS = "object_name_uids"  # Keras's counters of automatic names (keras/src/utils/naming.py)


def sample_batch(x, y, batch_size):
    """One batch of the `fit` call's data, taken without touching its iterators; None when unknown."""
    import tensorflow as tf

    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        n = batch_size or 32
        return x[:n], y[:n]
    if isinstance(x, tf.data.Dataset):
        # Iterating would advance the dataset's shuffle seeds: zeros of its element shapes instead.
        def zeros(spec):
            shape = [d if d is not None else (batch_size or 32) for d in spec.shape.as_list()]
            return np.zeros(shape, spec.dtype.as_numpy_dtype)

        element = tf.nest.map_structure(zeros, x.element_spec)
        return tuple(element[:2]) if isinstance(element, tuple) and len(element) >= 2 else None
    return None


class OfferTrial(keras.callbacks.Callback):
    """Measures the candidates once, after the first step of the `fit` call it is added to."""

    def __init__(self, policy: str | None, try_xla: bool, store, reporter):
        super().__init__()
        self.policy, self.try_xla = policy, try_xla
        self.store, self.reporter = store, reporter
        self.batch = None
        self.done = False
        self.offers: list[dict] = []

    @property
    def pending(self) -> bool:
        return not self.done

    def before_fit(self, x, y, batch_size) -> None:
        if not self.done and self.batch is None:
            self.batch = sample_batch(x, y, batch_size)
            if self.batch is None:
                self._finish("not measured: only NumPy arrays and tf.data datasets give a batch to measure on")

    def on_train_batch_end(self, batch, logs=None):
        if self.done or self.batch is None:
            return
        state = _rng_state()
        try:
            self._measure(self.model)
        except Exception as exc:  # noqa: BLE001 (a model the copy cannot train: nothing offered, training goes on)
            self._finish(f"not measured: {type(exc).__name__}: {str(exc)[:200]}")
        finally:
            _set_rng_state(state)

    def _measure(self, model) -> None:
        own_policy = keras.mixed_precision.global_policy().name
        own_jit = bool(model.jit_compile)
        left = trial.steps_left(self.params, 1, getattr(model, "_initial_epoch", None) or 0)
        doc: dict = {"own": {"policy": own_policy, "xla": own_jit, "step_s": None}, "offers": [], "skipped": []}
        candidates = []
        if self.policy not in (None, own_policy):
            candidates.append(("mixed_precision", self.policy, self.policy, own_jit, 1.0))
        if self.try_xla and not own_jit:
            candidates.append(("xla", "on", own_policy, True, COMPILE_FACTOR))
        if not candidates:
            self._finish("nothing to measure: the script already uses the settings auto would try")
            return
        if not trial.could_afford(PHASE_STEPS, left):
            # Not even the copy is measured (a clone, a retrace and 11 steps: about a second of a
            # small job): no step time would bring a trial under the budget.
            why = (f"a trial's {PHASE_STEPS} steps alone are over {trial.budget_share():.1%} of the "
                   + ("fit call, whose length is unknown" if left is None else f"{left} steps left"))
            doc["skipped"] = [{"setting": setting, "value": value, "why": why} for setting, value, *_ in candidates]
            self._finish("", doc)
            return
        first_s, base_s = _time(_copy(model, own_policy, own_jit), self.batch)
        doc["own"]["step_s"] = base_s
        for setting, value, policy, jit, factor in candidates:
            cost_s = trial.predicted_cost_s(first_s, base_s, PHASE_STEPS, factor)
            if not trial.affordable(cost_s, base_s, left):
                doc["skipped"].append({"setting": setting, "value": value, "predicted_s": round(cost_s, 3)})
                continue
            copy_ = _copy(model, policy, jit)
            if jit and not copy_.jit_compile:  # Keras refuses XLA (op determinism, a layer XLA cannot compile)
                doc["skipped"].append({"setting": setting, "value": value, "why": "Keras turns jit_compile off here"})
                continue
            _, step_s = _time(copy_, self.batch)
            ratio = step_s / base_s if base_s else None
            doc["offers"].append({"setting": setting, "value": value, "step_s": step_s, "ratio": ratio})
        self._finish("", doc)

    def _finish(self, reason: str, doc: dict | None = None) -> None:
        self.done, self.batch = True, None
        doc = doc or {"offers": [], "skipped": [], "reason": reason}
        self.store.write_bytes(TUNING_KEY, json.dumps(doc).encode())
        report(doc, self.reporter)
        self.offers = faster(doc)


def faster(doc: dict) -> list[dict]:
    """The offers that measured faster than the script's own settings, each with its `message`."""
    return [{**o, "message": message(o)} for o in doc.get("offers", [])
            if o.get("ratio") is not None and o["ratio"] < OFFER_BELOW]


def message(offer: dict) -> str:
    """ "mixed_bfloat16 would take 0.62x the step time: set `training.mixed_precision: mixed_bfloat16`" """
    what = "jit_compile (XLA)" if offer["setting"] == "xla" else offer["value"]
    return (f"{what} would take {offer['ratio']:.2f}x the step time: set "
            f"`training.{offer['setting']}: {offer['value']}` (or `training.auto_apply: true`)")


def report(doc: dict, reporter, reused: bool = False) -> None:
    """One `offer` event per faster candidate, or one saying nothing is offered and why."""
    offers = faster(doc)
    for offer in offers:
        data = {k: v for k, v in offer.items() if k != "message"}
        reporter.event("offer", offer["message"] + (" (measured by an earlier attempt)" if reused else ""),
                       **data, reused=reused)
    if not offers:
        reasons = doc.get("reason") or ("; ".join(f"{s['setting']}: {_skipped(s)}" for s in doc["skipped"])
                                        or "the script's own settings measured fastest")
        reporter.event("offer", f"no speed-up offered: {reasons}", offers=[], reused=reused)


def _skipped(entry: dict) -> str:
    if "why" in entry:
        return entry["why"]
    return f"a trial would cost ~{entry['predicted_s']} s, over {trial.budget_share():.1%} of the job"


def load(store) -> dict | None:
    try:
        return json.loads(store.read_bytes(TUNING_KEY))
    except (NotFoundError, ValueError):
        return None


def _copy(model, policy: str, jit: bool):
    """A trainable copy of `model` under `policy`, compiled like it; its own variables."""
    def layer(source):
        config = source.get_config()
        if "dtype" in config:
            config["dtype"] = policy
        return source.__class__.from_config(config)

    clone = keras.models.clone_model(model, clone_function=layer)
    clone.set_weights(model.get_weights())
    optimizer = model.optimizer.__class__.from_config(model.optimizer.get_config())
    clone.compile(optimizer=optimizer, loss=model.loss, jit_compile=jit)
    return clone


def _time(model, batch) -> tuple[float, float]:
    """(first step s, median of the others) of `PHASE_STEPS` steps on one batch."""
    times = []
    for _ in range(PHASE_STEPS):
        t0 = time.perf_counter()
        model.train_on_batch(*batch)
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times[1:])


def _rng_state():
    """Python's, NumPy's and Keras's global random state (the copy's layers draw their seeds from
    them), and Keras's name counters (a model the script builds later is named as in a plain run)."""
    from spotfit.runtime.keras_internals import global_state, seed_generator

    generator = global_state.get_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR)
    value = None if generator is None else keras.ops.convert_to_numpy(generator.state)
    names = copy.deepcopy(global_state.get_global_attribute(_NAME_UIDS))
    return random.getstate(), np.random.get_state(), generator, value, names


def _set_rng_state(state) -> None:
    from spotfit.runtime.keras_internals import global_state, seed_generator

    python, numpy_state, generator, value, names = state
    random.setstate(python)
    np.random.set_state(numpy_state)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, generator)
    global_state.set_global_attribute(_NAME_UIDS, names)
    if generator is not None:
        generator.state.assign(value)
