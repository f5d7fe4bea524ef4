"""The contract test's real script: the shape and faults of `hollow.json` beside it, in Keras.

A small regression MLP trained with `fit` for `epochs` epochs of `steps_per_epoch` batches of 8,
shuffled. `nan_at_step` makes the weights NaN after the step before (so that step's loss is
NaN), `fail_at_step` raises RuntimeError after that step: what the hollow runtime does with the
same file (spotfit/hollow/scenario.py).
"""

import json
from pathlib import Path

import keras
import numpy as np

scenario = json.loads(Path(__file__).with_name("hollow.json").read_text())
epochs, steps_per_epoch = scenario["epochs"], scenario["steps_per_epoch"]
rng = np.random.default_rng(0)
x = rng.standard_normal((steps_per_epoch * 8, 4)).astype("float32")
y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]


class Faults(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if scenario.get("fail_at_step") == step:
            raise RuntimeError(scenario.get("fail_message", "the hollow script failed as scripted"))
        if scenario.get("nan_at_step") == step + 1:
            for var in self.model.trainable_variables:
                var.assign(np.full(var.shape, np.nan, dtype="float32"))


model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", metrics=["mae"])
model.fit(x, y, batch_size=8, epochs=epochs, shuffle=True, verbose=0, callbacks=[Faults()])
