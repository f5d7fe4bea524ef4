"""A tiny seeded Keras MLP for the sweep tests: 400 digits, 10 steps an epoch; lr and units are flags.

$TINY_PACE_S (default 0.05) paces the steps; it changes no number, only how long a step takes.
"""

import argparse
import os
import time
from pathlib import Path

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--units", type=int, default=16)
parser.add_argument("--epochs", type=int, default=6)
args = parser.parse_args()

digits = np.load(Path(__file__).with_name("digits.npz"))  # examples/digits/digits.npz
x, y = digits["images"].reshape(-1, 64), digits["target"]
x, y = (x[:480] / 16.0).astype("float32"), y[:480].astype("int32")
keras.utils.set_random_seed(3)
model = keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(args.units, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(args.lr), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])


PACE_S = float(os.environ.get("TINY_PACE_S", "0.05"))


class Pace(keras.callbacks.Callback):
    """50 ms a step in a sweep: a pruner's stop, read within a second, lands epochs before the end.

    A re-run alone has no pruner to wait for (`TINY_PACE_S=0`).
    """

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(PACE_S)


model.fit(x[:400], y[:400], batch_size=40, epochs=args.epochs, validation_data=(x[400:], y[400:]),
          shuffle=False, verbose=2, callbacks=[Pace()])
