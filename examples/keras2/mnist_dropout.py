"""The source documents' first model: an MNIST `Sequential` with Dropout, in tf.keras 2.

As the documents wrote it, with two changes: the data are the 8x8 digits in digits.npz beside it
(scikit-learn's copy; MNIST's `tf.keras.datasets.mnist.load_data()` downloads, and spotfit downloads nothing), and
the first line after the imports makes Dropout draw from a `tf.random.Generator`. Keras 2's
default (legacy stateful random ops) keeps its position inside TensorFlow's kernels, where no
checkpoint can reach it: without that line the job still resumes at the exact step with the
exact data, but its Dropout masks after a resume differ from an uninterrupted run's
(docs/resume.md#keras-2).
"""
from pathlib import Path

import numpy as np
import tensorflow as tf

tf.keras.backend.experimental.enable_tf_random_generator()  # see the header

digits = np.load(Path(__file__).with_name("digits.npz"))  # images, target
x_train, y_train = digits["images"][:1500] / 16.0, digits["target"][:1500]
x_test, y_test = digits["images"][1500:] / 16.0, digits["target"][1500:]

model = tf.keras.models.Sequential([
    tf.keras.layers.Flatten(input_shape=(8, 8)),
    tf.keras.layers.Dense(128, activation="relu"),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(10),
])
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
model.compile(optimizer="adam", loss=loss_fn, metrics=["accuracy"])
model.fit(x_train, y_train, epochs=5)
loss, accuracy = model.evaluate(x_test, y_test, verbose=2)
print(f"final: loss={loss!r} accuracy={accuracy!r}")
