# Copyright 2023 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, guides/keras_core/training_with_built_in_methods.py: "Training &
# evaluation with the built-in methods", by fchollet, sections "Custom metrics" and "Using a
# `PyDataset` object as input". Changed: the data (scikit-learn's 8x8 digits, in digits.npz, 64 inputs,
# instead of the MNIST download; 1000 train / 200 validation samples), the sizes (inputs of 64
# instead of 784, 3 epochs), the two sections joined: the `CategoricalTruePositives` model of the
# first trains on the `ExamplePyDataset`s of the second, and a last `final:` line with the
# history and the evaluation for the tests. The model, the custom metric, the PyDataset, compile,
# fit and evaluate are the guide's.
"""A `keras.utils.PyDataset` and a custom `keras.metrics.Metric`."""

import os

os.environ["KERAS_BACKEND"] = "tensorflow"

from pathlib import Path  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers  # noqa: E402

digits = np.load(Path(__file__).with_name("digits.npz"))
x, y = digits["images"].reshape(-1, 64).astype("float32") / 16, digits["target"].astype("float32")
x_train, y_train = x[:1000], y[:1000]
x_val, y_val = x[1000:1200], y[1000:1200]


def get_uncompiled_model():
    inputs = keras.Input(shape=(64,), name="digits")
    x = layers.Dense(64, activation="relu", name="dense_1")(inputs)
    x = layers.Dense(64, activation="relu", name="dense_2")(x)
    outputs = layers.Dense(10, activation="softmax", name="predictions")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


class CategoricalTruePositives(keras.metrics.Metric):
    def __init__(self, name="categorical_true_positives", **kwargs):
        super().__init__(name=name, **kwargs)
        self.true_positives = self.add_weight(name="ctp", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = tf.reshape(tf.argmax(y_pred, axis=1), shape=(-1, 1))
        values = tf.cast(y_true, "int32") == tf.cast(y_pred, "int32")
        values = tf.cast(values, "float32")
        if sample_weight is not None:
            sample_weight = tf.cast(sample_weight, "float32")
            values = tf.multiply(values, sample_weight)
        self.true_positives.assign_add(tf.reduce_sum(values))

    def result(self):
        return self.true_positives

    def reset_state(self):
        # The state of the metric will be reset at the start of each epoch.
        self.true_positives.assign(0.0)


class ExamplePyDataset(keras.utils.PyDataset):
    def __init__(self, x, y, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x = x
        self.y = y
        self.batch_size = batch_size

    def __len__(self):
        return int(np.ceil(len(self.x) / float(self.batch_size)))

    def __getitem__(self, idx):
        batch_x = self.x[idx * self.batch_size : (idx + 1) * self.batch_size]
        batch_y = self.y[idx * self.batch_size : (idx + 1) * self.batch_size]
        return batch_x, batch_y


train_py_dataset = ExamplePyDataset(x_train, y_train, batch_size=32)
val_py_dataset = ExamplePyDataset(x_val, y_val, batch_size=32)

model = get_uncompiled_model()
model.compile(
    optimizer=keras.optimizers.RMSprop(learning_rate=1e-3),
    loss=keras.losses.SparseCategoricalCrossentropy(),
    metrics=[CategoricalTruePositives()],
)
history = model.fit(train_py_dataset, batch_size=64, validation_data=val_py_dataset, epochs=3)

print("final:", repr([history.history, model.evaluate(val_py_dataset)]))
