# Copyright 2019 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, guides/writing_a_training_loop_from_scratch.py (the TensorFlow version,
# guides/writing_a_custom_training_loop_in_tensorflow.py): "Writing a training loop from scratch
# in TensorFlow", by fchollet. Changed: the data (scikit-learn's 8x8 digits, in digits.npz instead of the
# MNIST download, so 64 inputs and 600/200 samples), the sizes (epochs, batch size, logging every
# 5 batches), a final summary.json for the tests; the end-to-end GAN section is left out (its two
# optimizers take turns, which spotfit's apply hook does not instrument). The loops, the model,
# the optimizers, the metrics and the `tf.function` steps are the guide's.
"""Writing a training loop from scratch in TensorFlow: three unmodified `GradientTape` loops."""

import hashlib
import json
import os
import time

os.environ["KERAS_BACKEND"] = "tensorflow"

from pathlib import Path  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# ## A first end-to-end example


def get_model():
    inputs = keras.Input(shape=(64,), name="digits")
    x1 = keras.layers.Dense(64, activation="relu")(inputs)
    x2 = keras.layers.Dense(64, activation="relu")(x1)
    outputs = keras.layers.Dense(10, name="predictions")(x2)
    return keras.Model(inputs=inputs, outputs=outputs)


model = get_model()

optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

batch_size = 40
digits = np.load(Path(__file__).with_name("digits.npz"))
x_all = (digits["images"].reshape(-1, 64) / 16.0).astype("float32")
y_all = digits["target"].astype("int64")
x_train, y_train = x_all[:600], y_all[:600]  # 15 batches per epoch
x_val, y_val = x_all[600:800], y_all[600:800]

train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
train_dataset = train_dataset.shuffle(buffer_size=1024).batch(batch_size)
val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(batch_size)

epochs = 2
for epoch in range(epochs):
    print(f"\nStart of epoch {epoch}")
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        with tf.GradientTape() as tape:
            logits = model(x_batch_train, training=True)
            loss_value = loss_fn(y_batch_train, logits)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
        if step % 5 == 0:
            print(f"Training loss (for 1 batch) at step {step}: {float(loss_value):.4f}")
            print(f"Seen so far: {(step + 1) * batch_size} samples")

# ## Low-level handling of metrics: a fresh model and optimizer

model = get_model()
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
val_acc_metric = keras.metrics.SparseCategoricalAccuracy()
printed = []

epochs = 2
for epoch in range(epochs):
    print(f"\nStart of epoch {epoch}")
    start_time = time.time()
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        with tf.GradientTape() as tape:
            logits = model(x_batch_train, training=True)
            loss_value = loss_fn(y_batch_train, logits)
        grads = tape.gradient(loss_value, model.trainable_weights)
        optimizer.apply(grads, model.trainable_weights)
        train_acc_metric.update_state(y_batch_train, logits)
        if step % 5 == 0:
            print(f"Training loss (for 1 batch) at step {step}: {float(loss_value):.4f}")
    train_acc = train_acc_metric.result()
    print(f"Training acc over epoch: {float(train_acc):.4f}")
    train_acc_metric.reset_state()
    for x_batch_val, y_batch_val in val_dataset:
        val_logits = model(x_batch_val, training=False)
        val_acc_metric.update_state(y_batch_val, val_logits)
    val_acc = val_acc_metric.result()
    val_acc_metric.reset_state()
    print(f"Validation acc: {float(val_acc):.4f}")
    printed.append(round(float(val_acc), 6))

# ## Speeding-up your training step with `tf.function` (the same model and optimizer)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply(grads, model.trainable_weights)
    train_acc_metric.update_state(y, logits)
    return loss_value


@tf.function
def test_step(x, y):
    val_logits = model(x, training=False)
    val_acc_metric.update_state(y, val_logits)


epochs = 2
for epoch in range(epochs):
    print(f"\nStart of epoch {epoch}")
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        loss_value = train_step(x_batch_train, y_batch_train)
        if step % 5 == 0:
            print(f"Training loss (for 1 batch) at step {step}: {float(loss_value):.4f}")
    train_acc = train_acc_metric.result()
    print(f"Training acc over epoch: {float(train_acc):.4f}")
    train_acc_metric.reset_state()
    for x_batch_val, y_batch_val in val_dataset:
        test_step(x_batch_val, y_batch_val)
    val_acc = val_acc_metric.result()
    val_acc_metric.reset_state()
    print(f"Validation acc: {float(val_acc):.4f}")
    printed.append(round(float(val_acc), 6))

with open("summary.json", "w") as f:
    json.dump({"digest": hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest(),
               "iterations": int(optimizer.iterations.numpy()), "val_acc": printed}, f)
