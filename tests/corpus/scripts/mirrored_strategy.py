# Copyright 2020 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, guides/distributed_training_with_tensorflow.py, section "Single-host,
# multi-device synchronous training" of "Multi-GPU distributed training with TensorFlow", by
# fchollet. Changed: the data (scikit-learn's 8x8 digits, in digits.npz, 64 inputs, instead of the MNIST
# download; 640 train / 160 validation / the rest test samples), and a last `final:` line with the
# test metrics at full precision for the tests. The script's own `MirroredStrategy()`, the model
# and compile made in its scope, and `fit`/`evaluate` on `tf.data` are the guide's.
"""The script's own `tf.distribute.MirroredStrategy()`: model, compile and fit in its scope."""

import os

os.environ["KERAS_BACKEND"] = "tensorflow"

from pathlib import Path  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def get_compiled_model():
    # Make a simple 2-layer densely-connected neural network.
    inputs = keras.Input(shape=(64,))
    x = keras.layers.Dense(256, activation="relu")(inputs)
    x = keras.layers.Dense(256, activation="relu")(x)
    outputs = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


def get_dataset():
    batch_size = 32
    num_val_samples = 160

    # Return the digits dataset in the form of a `tf.data.Dataset`.
    digits = np.load(Path(__file__).with_name("digits.npz"))
    x, y = digits["images"].reshape(-1, 64).astype("float32") / 16, digits["target"].astype("float32")
    (x_train, y_train), (x_test, y_test) = (x[:800], y[:800]), (x[800:], y[800:])

    # Reserve num_val_samples samples for validation
    x_val = x_train[-num_val_samples:]
    y_val = y_train[-num_val_samples:]
    x_train = x_train[:-num_val_samples]
    y_train = y_train[:-num_val_samples]
    return (
        tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(batch_size),
        tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(batch_size),
        tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size),
    )


# Create a MirroredStrategy.
strategy = tf.distribute.MirroredStrategy()
print("Number of devices: {}".format(strategy.num_replicas_in_sync))

# Open a strategy scope.
with strategy.scope():
    # Everything that creates variables should be under the strategy scope.
    # In general this is only model construction & `compile()`.
    model = get_compiled_model()

    # Train the model on all available devices.
    train_dataset, val_dataset, test_dataset = get_dataset()
    model.fit(train_dataset, epochs=2, validation_data=val_dataset)

    # Test the model on all available devices.
    print("final:", repr(model.evaluate(test_dataset)))
