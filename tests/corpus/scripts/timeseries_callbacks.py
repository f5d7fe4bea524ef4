# Copyright 2020 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, examples/timeseries/timeseries_classification_from_scratch.py:
# "Timeseries classification from scratch", by hfawaz. Changed: the data (seeded synthetic
# two-class series, a noisy sine against a noisy square wave, 64 steps long, instead of the FordA
# download; 320 train / 100 test series), the sizes (8 epochs instead of 500, batches of 32,
# ReduceLROnPlateau patience 2 and EarlyStopping patience 3 instead of 20 and 50, so that they act
# within the run), the checkpoint file name (`best_model.keras`, the format Keras 3 saves), no
# plots, and a last `final:` line with the best model's test accuracy and the run's history for
# the tests. The model, the callbacks ModelCheckpoint + ReduceLROnPlateau + EarlyStopping, compile,
# fit with `validation_split` and the reload of the best model are the example's.
"""Callbacks ModelCheckpoint(save_best_only) + ReduceLROnPlateau + EarlyStopping in one `fit`."""

import keras
import numpy as np

# ## Load the data (synthetic, seeded: no download)

rng = np.random.default_rng(2020)
length = 64
t = np.linspace(0, 4 * np.pi, length)


def make_series(n):
    y = rng.integers(0, 2, n)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    sine = np.sin(t + phase)
    square = np.sign(sine)
    x = np.where(y[:, None] == 0, sine, square) + rng.normal(0, 0.8, (n, length))
    return x.astype("float32"), y


x_train, y_train = make_series(320)
x_test, y_test = make_series(100)

x_train = x_train.reshape((x_train.shape[0], x_train.shape[1], 1))
x_test = x_test.reshape((x_test.shape[0], x_test.shape[1], 1))

num_classes = len(np.unique(y_train))

idx = np.random.permutation(len(x_train))
x_train = x_train[idx]
y_train = y_train[idx]

# ## Build a model


def make_model(input_shape):
    input_layer = keras.layers.Input(input_shape)

    conv1 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(input_layer)
    conv1 = keras.layers.BatchNormalization()(conv1)
    conv1 = keras.layers.ReLU()(conv1)

    conv2 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv1)
    conv2 = keras.layers.BatchNormalization()(conv2)
    conv2 = keras.layers.ReLU()(conv2)

    conv3 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv2)
    conv3 = keras.layers.BatchNormalization()(conv3)
    conv3 = keras.layers.ReLU()(conv3)

    gap = keras.layers.GlobalAveragePooling1D()(conv3)

    output_layer = keras.layers.Dense(num_classes, activation="softmax")(gap)

    return keras.models.Model(inputs=input_layer, outputs=output_layer)


model = make_model(input_shape=x_train.shape[1:])

# ## Train the model

epochs = 8
batch_size = 32

callbacks = [
    keras.callbacks.ModelCheckpoint(
        "best_model.keras", save_best_only=True, monitor="val_loss"
    ),
    keras.callbacks.ReduceLROnPlateau(
        monitor="val_loss", factor=0.5, patience=2, min_lr=0.0001
    ),
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, verbose=1),
]
model.compile(
    optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
)
history = model.fit(
    x_train,
    y_train,
    batch_size=batch_size,
    epochs=epochs,
    callbacks=callbacks,
    validation_split=0.2,
    verbose=1,
)

# ## Evaluate model on test data

model = keras.models.load_model("best_model.keras")

y_pred = model.predict(x_test).argmax(axis=1)

print("Test accuracy", np.mean(y_pred == y_test))
print("final:", repr([np.mean(y_pred == y_test), history.history]))
