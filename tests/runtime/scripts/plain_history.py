"""A plain script that records what it ran: its history, dtype policy and `jit_compile` (out.json).

`--policy NAME` sets its own dtype policy, `--jit` compiles with `jit_compile=True`.
ReduceLROnPlateau (its `min_delta` larger than any improvement) adds `learning_rate` to the
history, and `accuracy` is a compiled metric whose running sums a mid-epoch resume must keep.
"""

import argparse
import json

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--policy")
parser.add_argument("--jit", action="store_true")
args = parser.parse_args()
if args.policy:
    keras.mixed_precision.set_global_policy(args.policy)

rng = np.random.default_rng(0)
x = rng.normal(size=(192, 8)).astype("float32")
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dropout(0.1),
                          keras.layers.Dense(2, activation="softmax")])
model.compile(keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"],
              jit_compile=True if args.jit else "auto")
plateau = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=1, factor=0.5, min_delta=10.0)
history = model.fit(x, y, batch_size=16, epochs=3, validation_split=0.25, verbose=2, callbacks=[plateau])
with open("out.json", "w") as f:
    json.dump({"history": history.history, "policy": keras.mixed_precision.global_policy().name,
               "jit": bool(model.jit_compile), "output_dtype": model.layers[-1].compute_dtype}, f)
