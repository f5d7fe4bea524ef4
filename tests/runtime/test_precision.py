"""Mixed precision: auto decides from the hardware, never fp16 on a CPU; outputs stay float32."""

from __future__ import annotations

import pytest

from spotfit.runtime import precision
from spotfit.runtime.precision import Hardware


def test_auto_from_gpu_compute_capability():
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((9, 0),)))[0] == "mixed_bfloat16"
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((7, 0),)))[0] == "mixed_float16"
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((6, 1),)))[0] == "off"
    # The weakest GPU decides: every replica must run the same policy.
    assert precision.choose("auto", Hardware(gpu_compute_capabilities=((8, 0), (7, 5))))[0] == "mixed_float16"


def test_auto_on_cpus_never_picks_float16():
    for flags in (set(), {"avx512f"}, {"avx512_bf16"}, {"avx512_bf16", "amx_bf16", "amx_tile"}):
        policy, why = precision.choose("auto", Hardware(cpu_flags=frozenset(flags)))
        assert policy in ("off", "mixed_bfloat16") and why
    assert precision.choose("auto", Hardware(cpu_flags=frozenset({"amx_bf16"})))[0] == "mixed_bfloat16"
    assert precision.choose("auto", Hardware(cpu_flags=frozenset({"avx512_bf16"})))[0] == "mixed_bfloat16"
    assert precision.choose("auto", Hardware(cpu_flags=frozenset({"avx2"})))[0] == "off"


def test_auto_on_this_machine_picks_float32_or_bf16():
    policy, _ = precision.choose("auto", Hardware(cpu_flags=precision.cpu_flags()))
    assert policy in ("off", "mixed_bfloat16")


def test_explicit_choice_is_kept_and_bad_values_rejected():
    assert precision.choose("mixed_float16", Hardware())[0] == "mixed_float16"
    with pytest.raises(ValueError, match="mixed_precision"):
        precision.choose("fp8", Hardware())


@pytest.mark.slow
def test_outputs_stay_float32_under_mixed_bfloat16():
    import keras
    import numpy as np

    precision.apply("mixed_bfloat16")
    try:
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3, activation="softmax")])
        assert model.layers[-1].compute_dtype == "bfloat16"
        assert precision.keep_outputs_float32(model) == [model.layers[-1].name]
        out = model(np.ones((2, 4), "float32"))
        assert str(out.dtype) in ("float32", "<dtype: 'float32'>")
        assert model.layers[0].compute_dtype == "bfloat16"  # the rest still runs in bf16
        assert model.layers[0].kernel.dtype == "float32"  # variables stay float32
    finally:
        precision.apply("off")
    assert precision.keep_outputs_float32(model) == []  # float32 policy: nothing to do


def _tuned_model(monkeypatch, budget: str | None, epochs: int):
    """A small model built under mixed_bfloat16 and fit with a `PrecisionTuner`; (model, tuner, events, store)."""
    import keras
    import numpy as np

    from spotfit.runtime import trial
    from spotfit.runtime.reporter import Reporter
    from spotfit.stores import open_store

    if budget is None:
        monkeypatch.delenv(trial.BUDGET_ENV, raising=False)
    else:
        monkeypatch.setenv(trial.BUDGET_ENV, budget)
    store = open_store(f"memory://precision-tuner-{budget}/jobs/j1")
    events: list[tuple[str, dict]] = []
    reporter = Reporter(store, attempt=1)
    reporter.event = lambda kind, message, **data: events.append((kind, data))  # type: ignore[method-assign]
    precision.apply("mixed_bfloat16")
    try:
        rng = np.random.default_rng(0)
        x, y = rng.standard_normal((320, 8)).astype("float32"), rng.integers(0, 2, 320)
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(2, activation="softmax")])
        model.compile("adam", "sparse_categorical_crossentropy")
        precision.keep_outputs_float32(model)
        tuner = precision.PrecisionTuner("mixed_bfloat16", "test", store, reporter)
        tuner.before_fit(model)
        model.fit(x, y, batch_size=8, epochs=epochs, callbacks=[tuner], verbose=0)
        return model, tuner, events, store, keras.mixed_precision.global_policy().name
    finally:
        precision.apply("off")


@pytest.mark.slow
def test_auto_measures_float32_against_bf16_and_keeps_the_faster(monkeypatch):
    model, tuner, events, store, global_policy = _tuned_model(monkeypatch, budget="1000", epochs=1)
    (kind, data), = [e for e in events if e[0] == "precision"]
    assert data["steps_measured"] == {"off": precision.PHASE_STEPS - 1, "mixed_bfloat16": precision.PHASE_STEPS - 1}
    assert data["off_step_s"] > 0 and data["candidate_step_s"] > 0 and data["trial_s"] > 0
    assert data["predicted_s"] > 0  # what the budget was checked against
    faster = "mixed_bfloat16" if data["candidate_step_s"] < data["off_step_s"] else "off"
    assert tuner.choice == data["policy"] == faster
    assert precision.load_tuning(store)["policy"] == faster  # what a resumed attempt reuses
    hidden = model.layers[0].compute_dtype
    assert hidden == ("bfloat16" if faster == "mixed_bfloat16" else "float32")
    assert model.layers[-1].compute_dtype == "float32"  # outputs stay float32 either way
    assert global_policy == ("mixed_bfloat16" if faster == "mixed_bfloat16" else "float32")


@pytest.mark.slow
def test_a_job_too_short_to_pay_for_the_trial_trains_in_float32_like_its_plain_script(monkeypatch):
    model, tuner, events, _, global_policy = _tuned_model(monkeypatch, budget=None, epochs=1)
    (kind, data), = [e for e in events if e[0] == "precision"]
    assert tuner.choice == data["policy"] == "off" and "would cost" in data["reason"]
    assert data["steps_measured"]["mixed_bfloat16"] == 0 and data["trial_s"] == 0
    assert {layer.compute_dtype for layer in model.layers} == {"float32"} and global_policy == "float32"


def test_a_later_attempt_reuses_the_measured_choices_without_a_trial(tmp_path, monkeypatch):
    import json

    import keras

    from spotfit.attempt.config import RuntimeConfig
    from spotfit.runtime import main, xla
    from spotfit.runtime.session import Session
    from spotfit.stores import open_store

    monkeypatch.setenv("SPOTFIT_NUM_REPLICAS", "1")  # _speedups sets them; restored after the test
    monkeypatch.setenv("SPOTFIT_WORKER_INDEX", "0")
    url = f"file://{tmp_path}/job"
    store = open_store(url)
    store.write_bytes(precision.TUNING_KEY, json.dumps({"policy": "mixed_bfloat16", "off_step_s": 0.012,
                                                        "candidate_step_s": 0.008}).encode())
    store.write_bytes(xla.TUNING_KEY, json.dumps({"choice": "off", "off_step_s": 0.012, "on_step_s": 0.02}).encode())
    session = Session(RuntimeConfig(job_id="j", job_url=url, script="train.py", workdir=str(tmp_path), attempt=2,
                                    tensorboard=False, auto_apply=True))
    try:
        main._speedups(session)
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    finally:
        precision.apply("off")
    assert session.precision is None  # no trial: nothing measures again
    assert session.xla is not None and session.xla.choice is False and not session.xla.measuring
    events = {e["kind"]: e for e in (json.loads(store.read_bytes(k)) for k in store.list("events"))}
    assert events["precision"]["attempt"] == 2 and events["precision"]["data"] == {
        "reused": True, "policy": "mixed_bfloat16", "off_step_s": 0.012, "candidate_step_s": 0.008}
    assert events["xla"]["data"]["reused"] is True and events["xla"]["data"]["choice"] == "off"


@pytest.mark.slow
def test_a_candidate_that_breaks_the_step_falls_back_to_float32_in_the_trial(monkeypatch):
    import keras
    import numpy as np
    import tensorflow as tf

    from spotfit.runtime import trial
    from spotfit.runtime.reporter import Reporter
    from spotfit.stores import open_store

    class Concat(keras.Model):  # joins a layer's output with a float32 constant, as a GAN joins fakes and reals
        def __init__(self):
            super().__init__()
            self.hidden, self.head = keras.layers.Dense(4), keras.layers.Dense(1)

        def call(self, x):
            h = self.hidden(x)
            return self.head(tf.concat([h, tf.ones((tf.shape(h)[0], 1), tf.float32)], axis=-1))

    monkeypatch.setenv(trial.BUDGET_ENV, "1000")
    store = open_store("memory://precision-broken/jobs/j1")
    events: list[tuple[str, dict]] = []
    reporter = Reporter(store, attempt=1)
    reporter.event = lambda kind, message, **data: events.append((kind, data))  # type: ignore[method-assign]
    precision.apply("mixed_bfloat16")
    try:
        x = np.random.default_rng(0).standard_normal((320, 3)).astype("float32")
        model = Concat()
        model.compile("sgd", "mse")  # its layers are created under the candidate
        tuner = precision.PrecisionTuner("mixed_bfloat16", "test", store, reporter)
        tuner.before_fit(model)
        history = model.fit(x, x.sum(axis=1), batch_size=8, epochs=1, callbacks=[tuner], verbose=0)
        policy = keras.mixed_precision.global_policy().name
    finally:
        precision.apply("off")
    assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])
    kinds = [k for k, _ in events]
    assert kinds == ["speedup_fallback", "precision"]
    assert events[0][1]["applied"] == "mixed_bfloat16" and events[1][1]["policy"] == "off"
    assert tuner.choice == "off" and policy == "float32"
    assert {layer.compute_dtype for layer in model.layers} == {"float32"}
