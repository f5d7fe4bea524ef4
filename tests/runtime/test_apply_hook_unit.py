"""The apply hook in-process: which model a loop saves, steps counted once per apply, eagerly and
in a `tf.function`, and nothing counted while another driver (`fit`, `spotfit.loop`) trains."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from spotfit.attempt.config import RuntimeConfig
from spotfit.runtime import apply_hook
from spotfit.runtime.session import Session


def _model(name: str) -> keras.Model:
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)], name=name)


def test_the_model_saved_is_the_one_holding_exactly_the_applied_variables():
    head, other = _model("head"), _model("other")
    combined = keras.Sequential([keras.Input((3,)), head, keras.layers.Dense(1)], name="combined")
    assert apply_hook.find_model(head.trainable_variables) is head
    assert apply_hook.find_model(head.trainable_variables[:1]) is head  # the smallest that holds them
    assert apply_hook.find_model(combined.trainable_variables) is combined
    assert apply_hook.find_model(other.trainable_variables + head.trainable_variables) is None
    del combined


@pytest.fixture
def hooked(monkeypatch):
    cfg = RuntimeConfig(job_id="j", job_url="memory://apply-hook-unit", script="s.py", workdir=".",
                        interval_steps=2)
    session = Session(cfg)
    hook = apply_hook.ApplyHook(session)
    monkeypatch.setattr(apply_hook, "_hook", [hook])
    monkeypatch.setattr(apply_hook._BaseOptimizer, "apply", apply_hook._apply)
    return session, hook


def _grads(model, x, y):
    with tf.GradientTape() as tape:
        loss = keras.ops.mean((model(x, training=True) - y) ** 2)
    return tape.gradient(loss, model.trainable_variables)


def test_each_apply_is_one_step_eagerly_and_in_a_tf_function(hooked):
    session, hook = hooked
    keras.utils.set_random_seed(0)
    model = _model("trained")
    optimizer = keras.optimizers.SGD(0.1)
    x, y = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    for _ in range(3):
        optimizer.apply_gradients(zip(_grads(model, x, y), model.trainable_variables, strict=True))

    @tf.function
    def step():
        optimizer.apply(_grads(model, x, y), model.trainable_variables)

    for _ in range(2):
        step()
    assert session.reporter.state["step"] == 5
    assert model.optimizer is optimizer and session.model is model
    assert session.checkpoints.steps()[-2:] == [2, 4]  # every 2 steps; keep: 2
    hook.finish()
    assert session.checkpoints.steps()[-1] == 5 and session.calls.finished == {1: 5}
    assert int(optimizer.iterations.numpy()) == 5


def test_applies_inside_another_driver_are_not_counted(hooked):
    session, hook = hooked
    model, optimizer = _model("fitted"), keras.optimizers.SGD(0.1)
    session.watcher.in_training = True  # as inside `fit` or `spotfit.loop`, whose callback counts
    optimizer.apply(_grads(model, np.ones((2, 3), "float32"), np.zeros((2, 2), "float32")),
                    model.trainable_variables)
    assert hook.loop is None and session.reporter.state["step"] == 0
    assert int(optimizer.iterations.numpy()) == 1  # the update itself happened
