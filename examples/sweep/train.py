"""Digits MLP for the sweep example: learning rate, width and dropout are flags a sweep sets.

Plain Keras; it does not import spotfit. `spotfit sweep sweep.yaml` runs it once per trial with
`--lr`, `--units` and `--dropout` appended to the job's args.
"""

import argparse
from pathlib import Path

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--units", type=int, default=32)
parser.add_argument("--dropout", type=float, default=0.0)
parser.add_argument("--epochs", type=int, default=9)
args = parser.parse_args()

digits = np.load(Path(__file__).with_name("digits.npz"))  # 8x8 digits (examples/digits/train.py)
x, y = digits["images"].reshape(-1, 64), digits["target"]
x, y = (x / 16.0).astype("float32"), y.astype("int32")
keras.utils.set_random_seed(7)
model = keras.Sequential([
    keras.Input(shape=(64,)),
    keras.layers.Dense(args.units, activation="relu"),
    keras.layers.Dropout(args.dropout),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer=keras.optimizers.Adam(args.lr), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x[:1500], y[:1500], batch_size=32, epochs=args.epochs, validation_data=(x[1500:], y[1500:]), verbose=2)
