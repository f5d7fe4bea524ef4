"""A small regression MLP whose loss becomes NaN at a known global step: that batch's targets are NaN.

No shuffling, so the batch order is fixed: batch `--nan-step` (1-based, first epoch) has NaN
targets, its gradients make the weights NaN, and so every later loss is NaN too.
"""

import argparse

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--nan-step", type=int, required=True)
parser.add_argument("--epochs", type=int, default=40)
args = parser.parse_args()

BATCH = 16
rng = np.random.default_rng(0)
x = rng.standard_normal((BATCH * 40, 8)).astype("float32")
y = x[:, :1] * 2.0 - x[:, 1:2]
y[(args.nan_step - 1) * BATCH:args.nan_step * BATCH] = np.nan
keras.utils.set_random_seed(3)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH), epochs=args.epochs, verbose=2)
