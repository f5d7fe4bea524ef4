"""The script both sides of bench_runtime.py run: a plain Keras conv net, timed.

`BENCH_MODEL=small` (default): a small conv net on digits (8x8, batch 32, ~5 ms steps on 2 CPU
cores). `BENCH_MODEL=large`: a wider conv net on 32x32x3 random images (batch 64, ~50 ms steps).
It measures its own wall time per training step (a callback of its own, so the same measurement
runs under plain `python` and under spotfit) and writes it to $BENCH_OUT: `s_per_step` over
every step from the start of training (tracing, any trial steps and checkpoints included) and
`s_per_step_steady` after a warm-up.
"""

import json
import os
import time

import keras
import numpy as np

WARMUP = 30


class StepClock(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.t_begin = time.perf_counter()
        self.marks = []

    def on_train_batch_end(self, batch, logs=None):
        self.marks.append(time.perf_counter())


keras.utils.set_random_seed(3)
if os.environ.get("BENCH_MODEL", "small") == "large":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, 1024).astype("int32")
    batch_size, default_epochs = 64, 6
    model = keras.Sequential([
        keras.Input(shape=(32, 32, 3)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(128, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10, activation="softmax"),
    ])
else:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images.astype("float32") / 16.0)[..., None]
    y = digits.target.astype("int32")
    batch_size, default_epochs = 32, 8
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
model.fit(x, y, batch_size=batch_size, epochs=int(os.environ.get("BENCH_EPOCHS", default_epochs)), shuffle=True,
          callbacks=[clock], verbose=0)
marks = np.array(clock.marks)
out = {
    "s_per_step": float((marks[-1] - clock.t_begin) / len(marks)),
    "s_per_step_steady": float((marks[-1] - marks[WARMUP]) / (len(marks) - 1 - WARMUP)),
    "steps": len(marks),
}
with open(os.environ["BENCH_OUT"], "w") as f:
    json.dump(out, f)
