"""A model that trains with optimizers of its own (a GAN's `compile(d_optimizer=, g_optimizer=)`):
their state is saved and put back, and the `model.optimizer` it never used is not built."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from spotfit.runtime import model_state  # noqa: E402


class TwoOptimizers(keras.Model):
    """The shape of keras-io's GAN: two sub-models, each stepped by its own optimizer in `train_step`."""

    def __init__(self):
        super().__init__()
        self.first = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        self.second = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])

    def compile(self, first_optimizer, second_optimizer):
        super().compile()
        self.first_optimizer = first_optimizer
        self.second_optimizer = second_optimizer

    def train_step(self, data):
        x, y = data
        for net, optimizer in ((self.first, self.first_optimizer), (self.second, self.second_optimizer)):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self.second(self.first(x)) - y))
            optimizer.apply(tape.gradient(loss, net.trainable_weights), net.trainable_weights)
        return {"loss": loss}


def _model() -> TwoOptimizers:
    keras.utils.set_random_seed(0)
    model = TwoOptimizers()
    model.compile(keras.optimizers.Adam(1e-2), keras.optimizers.Adam(1e-3))
    return model


def test_a_models_own_optimizers_come_back_and_its_unused_optimizer_stays_unbuilt():
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 1), "float32")
    trained = _model()
    trained.fit(x, y, batch_size=4, epochs=1, verbose=0)
    arrays = model_state.capture(trained)
    assert not trained.optimizer.built and not arrays["optimizer_built"][0]

    fresh = _model()
    model_state.restore(fresh, arrays, {})
    assert not fresh.optimizer.built  # built, it would hold slots the checkpoint does not
    for mine, theirs in ((fresh.first_optimizer, trained.first_optimizer),
                         (fresh.second_optimizer, trained.second_optimizer)):
        assert [tuple(v.shape) for v in mine.variables] == [tuple(v.shape) for v in theirs.variables]
        for a, b in zip(mine.variables, theirs.variables, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(fresh.first_optimizer.iterations.numpy()) == 2
    # The next step of each continues from the same state.
    trained.fit(x, y, batch_size=4, epochs=1, verbose=0)
    fresh.fit(x, y, batch_size=4, epochs=1, verbose=0)
    for a, b in zip(fresh.get_weights(), trained.get_weights(), strict=True):  # paths differ: a second model
        np.testing.assert_array_equal(a, b)
