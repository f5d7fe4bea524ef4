# Copyright 2015 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, examples/vision/mnist_convnet.py: "Simple MNIST convnet", by fchollet.
# Changed: the data (scikit-learn's 8x8 digits, in digits.npz, each pixel repeated 2x2 into a 16x16
# image, instead of the MNIST download; 1500 train / 297 test samples), the sizes (3 epochs
# instead of 15), no model.summary(), and a last `final:` line with the test metrics at full
# precision for the tests. The Sequential model, compile, fit and evaluate are the example's.
"""Simple MNIST convnet: a Sequential CNN trained by `fit` with `validation_split`."""

from pathlib import Path

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

# ## Prepare the data

# Model / data parameters
num_classes = 10
input_shape = (16, 16, 1)

# Load the data and split it between train and test sets
digits = np.load(Path(__file__).with_name("digits.npz"))
images = np.kron(digits["images"], np.ones((2, 2)))  # 8x8 -> 16x16
labels = digits["target"]
(x_train, y_train), (x_test, y_test) = (images[:1500], labels[:1500]), (images[1500:], labels[1500:])

# Scale images to the [0, 1] range
x_train = x_train.astype("float32") / 16
x_test = x_test.astype("float32") / 16
# Make sure images have shape (16, 16, 1)
x_train = np.expand_dims(x_train, -1)
x_test = np.expand_dims(x_test, -1)
print("x_train shape:", x_train.shape)
print(x_train.shape[0], "train samples")
print(x_test.shape[0], "test samples")


# convert class vectors to binary class matrices
y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

# ## Build the model

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)

# ## Train the model

batch_size = 128
epochs = 3

model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])

model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1)

# ## Evaluate the trained model

score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
print("final:", repr(score))
