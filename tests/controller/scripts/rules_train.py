"""A small digits MLP for the rules tests: learning rate, epochs and a starved pipeline are flags."""

import argparse
import time

import keras
import tensorflow as tf
from sklearn.datasets import load_digits

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--starve-ms", type=float, default=0.0, help="sleep per batch in the input pipeline")
args = parser.parse_args()

digits = load_digits()
x = (digits.data / 16.0).astype("float32")
y = digits.target.astype("int32")
keras.utils.set_random_seed(11)
model = keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(args.lr), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
train = tf.data.Dataset.from_tensor_slices((x[:1500], y[:1500])).batch(32)
if args.starve_ms:
    def slow(a, b):
        def wait(t):
            time.sleep(args.starve_ms / 1000.0)
            return t
        out = tf.numpy_function(wait, [a], tf.float32, stateful=True)
        out.set_shape(a.shape)
        return out, b
    train = train.map(slow)
model.fit(train, epochs=args.epochs, validation_data=(x[1500:], y[1500:]), verbose=2)
print("final", model.evaluate(x[1500:], y[1500:], verbose=0))
