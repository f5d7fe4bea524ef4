"""Digits: a small Keras CNN on the 8x8 digits in digits.npz beside it (no download).

Plain Keras; it does not import spotfit. Run it directly (`python train.py --epochs 3`) or
under spotfit (`spotfit run spotfit.yaml`), which checkpoints it and resumes it after
preemptions at the exact step.
"""

import argparse
from pathlib import Path

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--dataset", choices=["arrays", "tfdata", "tfdata-repeat"], default="arrays")
args = parser.parse_args()

# The 1,797 digits of the UCI ML hand-written digits test set (E. Alpaydin, C. Kaynak; CC BY 4.0),
# as scikit-learn bundles them: 8x8 pixels in 0..16 (float64), and their labels.
digits = np.load(Path(__file__).with_name("digits.npz"))
x = (digits["images"].astype("float32") / 16.0)[..., None]
y = digits["target"].astype("int32")
x_train, y_train, x_test, y_test = x[:1500], y[:1500], x[1500:], y[1500:]

keras.utils.set_random_seed(7)
model = keras.Sequential(
    [
        keras.Input(shape=(8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ]
)
model.compile(
    optimizer=keras.optimizers.Adam(1e-3),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
)

if args.dataset.startswith("tfdata"):
    import tensorflow as tf

    train = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(x_train), seed=7)
        .batch(args.batch_size)
    )
    if args.dataset == "tfdata-repeat":  # an endless pipeline: epochs are `steps_per_epoch` long
        model.fit(train.repeat(), epochs=args.epochs, steps_per_epoch=40,
                  validation_data=(x_test, y_test), verbose=2)
    else:
        model.fit(train, epochs=args.epochs, validation_data=(x_test, y_test), verbose=2)
else:
    model.fit(
        x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
        validation_data=(x_test, y_test), shuffle=True, verbose=2,
    )

loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
print(f"final test accuracy: {accuracy:.4f} (loss {loss:.4f})")
