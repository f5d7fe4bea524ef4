"""XLA auto: measured on the job's own steps, both timings recorded, the faster kept and reused."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import keras
import pytest

from spotfit.runtime import fit_call, fit_wrapper, instrument, trial, xla
from spotfit.runtime.fit_calls import FitCalls
from spotfit.runtime.reporter import Reporter
from spotfit.stores import open_store
from tests.support.jobs import run_inline_job

SCRIPT = '''
import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.standard_normal((640, 16)).astype("float32")
y = (x[:, :4].sum(axis=1) > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(64, activation="relu"), keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=3, verbose=2)
'''


def test_decide_keeps_the_faster():
    assert xla.decide(0.010, 0.007) is True
    assert xla.decide(0.010, 0.013) is False
    assert xla.decide(0.010, None) is False  # XLA never ran (failed or training too short)


def test_auto_does_not_measure_where_timing_must_not_decide():
    assert xla.without_measuring(has_gpu=False, deterministic=False, distributed=False) == (None, "")
    assert xla.without_measuring(has_gpu=False, deterministic=True, distributed=False)[0] is False
    assert xla.without_measuring(has_gpu=True, deterministic=True, distributed=False)[0] is True
    assert xla.without_measuring(has_gpu=True, deterministic=False, distributed=True)[0] is False


def test_the_tuner_is_a_callback_of_fit_only_while_it_measures():
    store = open_store("memory://xla-callbacks/jobs/j1")
    reporter = Reporter(store, attempt=1)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    for mode, installed in (("off", False), ("on", False), ("auto", True)):
        tuner = xla.XlaTuner(mode, store, reporter)
        tuner.before_fit(model)
        session = SimpleNamespace(xla=tuner, precision=None, offer=None, tensorboard=None,
                                  calls=FitCalls(None, None))
        kinds = [type(c) for c in fit_call.callbacks(session, fit_wrapper.KERAS3, None, [], 0)]
        assert kinds == ([xla.XlaTuner] if installed else []) + [instrument.SpotfitCallback], mode
        assert tuner.measuring is installed and model.jit_compile is (mode == "on")


@pytest.mark.slow
def test_auto_measures_both_keeps_the_faster_and_a_resumed_attempt_reuses_it(tmp_path, monkeypatch):
    monkeypatch.setenv(trial.BUDGET_ENV, "1000")  # a 60-step job could never afford a trial otherwise
    doc = run_inline_job(tmp_path, "name: xla\nscript: train.py\nmarket: {trace: null}\n"
                         "training: {xla: auto, auto_apply: true, mixed_precision: \"off\", seed: 0}\n"
                         "checkpoint: {interval: {steps: 10}}\n", SCRIPT,
                         "--preempt-at", "30:5")
    assert doc["state"] == "completed" and doc["step"] == 60
    job = Path(doc["store"][len("file://"):])
    events = [json.loads(p.read_text()) for p in sorted((job / "events").glob("*.json"))]
    measured, reused = [e for e in events if e["kind"] == "xla"]
    data = measured["data"]
    assert measured["attempt"] == 1 and data["off_step_s"] > 0 and data["on_step_s"] > 0
    assert data["steps_measured"] == {"off": xla.PHASE_STEPS - 1, "on": xla.PHASE_STEPS - 1}
    assert data["choice"] == ("on" if data["on_step_s"] < data["off_step_s"] else "off")
    assert json.loads((job / xla.TUNING_KEY).read_text())["choice"] == data["choice"]
    assert reused["attempt"] == 2 and reused["data"]["reused"] and reused["data"]["choice"] == data["choice"]


MIRRORED_SCRIPT = SCRIPT.replace("epochs=3", "epochs=2")


@pytest.mark.slow
def test_a_compile_failure_under_xla_on_falls_back_and_training_goes_on(tmp_path, monkeypatch):
    # XLA cannot compile a MirroredStrategy step whose variables live on two devices
    # (tfvariable_on_a_different_device); two logical CPUs give the strategy two replicas.
    monkeypatch.setenv("SPOTFIT_LOGICAL_CPUS", "2")
    doc = run_inline_job(tmp_path, "name: xla-fallback\nscript: train.py\nmarket: {trace: null}\n"
                         "training: {xla: \"on\", strategy: mirrored}\n", MIRRORED_SCRIPT)
    assert doc["state"] == "completed"
    job = Path(doc["store"][len("file://"):])
    events = [json.loads(p.read_text()) for p in sorted((job / "events").glob("*.json"))]
    kinds = [e["kind"] for e in events]
    assert "xla_failed" in kinds, kinds
    failed = next(e for e in events if e["kind"] == "xla_failed")
    assert "InvalidArgumentError" in failed["message"]
    assert [e["data"]["choice"] for e in events if e["kind"] == "xla"] == ["on", "off"]  # asked, then fell back
    assert kinds.count("failed") == 0 and kinds[-1] == "done"


class _CountTraces(keras.layers.Layer):
    """Counts its calls: inside `fit` Python runs only while the train step is traced."""

    calls = 0

    def call(self, x):
        _CountTraces.calls += 1
        return x


def _fit_counting_traces(callbacks: list, before_fit=None) -> int:
    """Calls of the model's Python code during an 80-step `fit` of a fresh model: its traces."""
    import numpy as np

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((320, 8)).astype("float32"), rng.integers(0, 2, 320)
    model = keras.Sequential([keras.Input((8,)), _CountTraces(), keras.layers.Dense(2, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    if before_fit is not None:
        before_fit(model)
    before = _CountTraces.calls
    model.fit(x, y, batch_size=8, epochs=2, callbacks=callbacks, verbose=0)
    return _CountTraces.calls - before


@pytest.mark.slow
def test_a_job_too_short_for_the_xla_trial_traces_its_step_as_often_as_plain_fit(monkeypatch):
    monkeypatch.delenv(trial.BUDGET_ENV, raising=False)
    store = open_store("memory://xla-skip/jobs/j1")
    events: list[tuple[str, dict]] = []
    reporter = Reporter(store, attempt=1)
    reporter.event = lambda kind, message, **data: events.append((kind, data))  # type: ignore[method-assign]
    tuner = xla.XlaTuner("auto", store, reporter)
    tuned = _fit_counting_traces([tuner], tuner.before_fit)  # 80 steps: too short to pay for a trial
    (data,) = [d for kind, d in events if kind == "xla"]
    assert data["choice"] == "off" and "would cost" in data["reason"] and data["predicted_s"] > 0
    assert data["steps_measured"] == {"off": xla.PHASE_STEPS - 1, "on": 0}
    assert tuned == _fit_counting_traces([]), "the skipped trial rebuilt the train step: a retrace plain fit never pays"
