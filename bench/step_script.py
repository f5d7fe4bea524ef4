"""The script both sides of bench_runtime.py run: a plain Keras MLP+conv on digits, timed.

It measures its own wall time per training step after a warm-up (a callback of its own, so the
same measurement runs under plain `python` and under spotfit) and writes it to $BENCH_OUT.
"""

import json
import os
import time

import keras
import numpy as np
from sklearn.datasets import load_digits

WARMUP = 30


class StepClock(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.marks = []

    def on_train_batch_end(self, batch, logs=None):
        self.marks.append(time.perf_counter())


digits = load_digits()
x = (digits.images.astype("float32") / 16.0)[..., None]
y = digits.target.astype("int32")
keras.utils.set_random_seed(3)
model = keras.Sequential([
    keras.Input(shape=(8, 8, 1)),
    keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
    keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(128, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
clock = StepClock()
model.fit(x, y, batch_size=32, epochs=int(os.environ.get("BENCH_EPOCHS", "8")), shuffle=True,
          callbacks=[clock], verbose=0)
marks = np.array(clock.marks[WARMUP:])
out = {"s_per_step": float((marks[-1] - marks[0]) / (len(marks) - 1)), "steps": len(clock.marks)}
with open(os.environ["BENCH_OUT"], "w") as f:
    json.dump(out, f)
