"""auto's side measurement: it offers a faster setting without changing what the script trains."""

from __future__ import annotations

import json

import keras
import numpy as np

from spotfit.runtime import offer, trial
from spotfit.runtime.reporter import Reporter
from spotfit.stores import open_store


def _train(callbacks: list) -> tuple[list, list[float], float, str]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    keras.utils.set_random_seed(4)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dropout(0.3),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    for cb in callbacks:
        cb.before_fit(x, y, 16)
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=callbacks)
    after = float(keras.random.uniform((), seed=None))  # the global RNG after training, as a later model would see it
    name = keras.layers.Dense(1).name  # the next automatic name, as a later model would get it
    keras.backend.clear_session()
    return [w.tolist() for w in model.get_weights()], history.history["loss"], after, name


def test_the_side_measurement_changes_nothing_the_script_trains(monkeypatch):
    monkeypatch.setenv(trial.BUDGET_ENV, "1000")
    store = open_store("memory://offer/jobs/j1")
    events: list[dict] = []
    reporter = Reporter(store, attempt=1)
    monkeypatch.setattr(reporter, "event", lambda kind, message, **data: events.append(
        {"kind": kind, "message": message, "data": data}))
    keras.backend.clear_session()
    plain = _train([])
    trial_cb = offer.OfferTrial("mixed_bfloat16", True, store, reporter)
    measured = _train([trial_cb])
    assert measured == plain  # same weights, losses, global random state and names afterwards
    doc = json.loads(store.read_bytes(offer.TUNING_KEY))
    assert doc["own"] == {"policy": "float32", "xla": False, "step_s": doc["own"]["step_s"]}
    assert sorted(o["setting"] for o in doc["offers"]) == ["mixed_precision", "xla"]
    assert keras.mixed_precision.global_policy().name == "float32"
    assert events and all(e["kind"] == "offer" for e in events)
    for e in events:
        if e["data"].get("ratio") is not None:
            assert e["message"].startswith(("mixed_bfloat16 would take", "jit_compile (XLA) would take"))


def test_the_offer_message_names_the_setting_to_write():
    line = offer.message({"setting": "mixed_precision", "value": "mixed_bfloat16", "ratio": 0.62})
    assert line == ("mixed_bfloat16 would take 0.62x the step time: set `training.mixed_precision: mixed_bfloat16` "
                    "(or `training.auto_apply: true`)")


def test_a_job_too_short_for_the_trial_is_not_measured(monkeypatch):
    monkeypatch.setenv(trial.BUDGET_ENV, "0.00001")
    store = open_store("memory://offer-short/jobs/j1")
    reporter = Reporter(store, attempt=1)
    _train([offer.OfferTrial("mixed_bfloat16", True, store, reporter)])
    doc = json.loads(store.read_bytes(offer.TUNING_KEY))
    assert doc["offers"] == [] and sorted(s["setting"] for s in doc["skipped"]) == ["mixed_precision", "xla"]
    # 12 steps in all: too short for any trial's 11 steps at this share, so not even the copy ran.
    assert doc["own"]["step_s"] is None
    assert all("steps alone are over" in s["why"] and "11 steps left" in s["why"] for s in doc["skipped"])


def test_a_job_long_enough_for_the_steps_but_not_the_retrace_measures_only_its_own_settings(monkeypatch):
    # 11 steps left after the first, at a share of 1: the steps fit, the copy is measured, and the
    # candidates' retraces (XLA's at 6x) are then predicted over the budget.
    monkeypatch.setenv(trial.BUDGET_ENV, "1")
    store = open_store("memory://offer-mid/jobs/j1")
    reporter = Reporter(store, attempt=1)
    _train([offer.OfferTrial(None, True, store, reporter)])
    doc = json.loads(store.read_bytes(offer.TUNING_KEY))
    assert doc["own"]["step_s"] > 0 and doc["offers"] == []
    assert [s["setting"] for s in doc["skipped"]] == ["xla"] and doc["skipped"][0]["predicted_s"] > 0
