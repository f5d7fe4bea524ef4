# Written for spotfit's tests in the style of the TensorFlow 2.x guide "Customizing what happens in
# fit()" (tensorflow.org/guide/keras/customizing_what_happens_in_fit, TF 2.2-2.15, tf.keras 2).
# Not a copy: the data are generated here. `compiled_loss` and `compiled_metrics` are Keras 2's API.
"""A subclassed Model with its own `train_step` (GradientTape, compiled_loss, compiled_metrics)."""
import numpy as np
import tensorflow as tf
from tensorflow import keras


class CustomModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply_gradients(zip(gradients, trainable_vars))
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


inputs = keras.Input(shape=(32,))
hidden = keras.layers.Dense(32, activation="relu")(inputs)
outputs = keras.layers.Dense(1)(hidden)
model = CustomModel(inputs, outputs)
model.compile(optimizer="adam", loss="mse", metrics=["mae"])

rng = np.random.default_rng(5)
x = rng.random((1000, 32)).astype("float32")
y = (x[:, :4].sum(axis=1, keepdims=True) + 0.1 * rng.random((1000, 1))).astype("float32")
history = model.fit(x, y, epochs=3, batch_size=32, verbose=2)
print(f"final: loss={history.history['loss']!r} mae={history.history['mae']!r}")
