"""A small MLP whose input pipeline hangs after `--steps` batches, waiting for a file that never appears.

The generator runs in tf.data's thread and Keras's loop waits for its next batch: no step, no
progress, and no Python code on the main thread that a SIGTERM handler could run in.
"""

import argparse
import time
from pathlib import Path

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--wait-for", required=True, help="a file that the test never creates")
args = parser.parse_args()

BATCH = 16
rng = np.random.default_rng(0)
x = rng.standard_normal((BATCH * args.steps, 8)).astype("float32")
y = (x[:, 0] > 0).astype("int32")


def batches():
    for i in range(args.steps):
        yield x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
    while not Path(args.wait_for).exists():  # the data never arrives
        time.sleep(0.05)


keras.utils.set_random_seed(3)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
# Eager steps: no tracing, so no step before the hang takes long enough to look stalled.
model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy", run_eagerly=True)
model.fit(batches(), steps_per_epoch=1000, epochs=1, verbose=2)
