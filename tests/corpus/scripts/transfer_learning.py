# Copyright 2020 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, guides/transfer_learning.py, section "An end-to-end example:
# fine-tuning an image classification model on a cats vs. dogs dataset" of "Transfer learning &
# fine-tuning", by fchollet. Changed: the data (scikit-learn's 8x8 digits, in digits.npz, each pixel
# repeated 4x4 into a 32x32 RGB image scaled to 0-255, label 1 for digits 5-9, instead of the
# cats_vs_dogs download through TFDS; 64 train / 32 validation images), the sizes (32x32 instead
# of 150x150, batches of 32, 2 epochs then 2 instead of 20 then 10), the base model (a small
# functional model of MobileNet's blocks, convolutions with batch normalization, with random
# weights, instead of Xception with ImageNet weights: no download; Keras's own MobileNet, 86
# layers, took 10 s of CPU to trace the fine-tuning step in each of the test's four processes),
# no plots or summaries, and a last `final:` line with both phases' histories for the tests. The
# in-model augmentation, the frozen base called with `training=False`, the head, the first
# compile and fit, then the unfrozen base, the recompile with a low learning rate and the second
# fit are the guide's.
"""Transfer learning: a frozen base, then unfrozen and recompiled, in two `fit` phases."""

from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

# ### Getting the data (from the bundled digits: no download)

digits = np.load(Path(__file__).with_name("digits.npz"))
images = np.kron(digits["images"][:96], np.ones((4, 4)))[..., None].repeat(3, axis=-1) * (255.0 / 16)
labels = (digits["target"][:96] >= 5).astype("float32")
train_ds = tf.data.Dataset.from_tensor_slices((images[:64].astype("float32"), labels[:64]))
validation_ds = tf.data.Dataset.from_tensor_slices((images[64:].astype("float32"), labels[64:]))

batch_size = 32

train_ds = train_ds.cache().batch(batch_size).prefetch(buffer_size=10)
validation_ds = validation_ds.cache().batch(batch_size).prefetch(buffer_size=10)

# ### Using random data augmentation

data_augmentation = keras.Sequential(
    [
        layers.RandomFlip("horizontal"),
        layers.RandomRotation(0.1),
    ]
)

# ## Build a model

# No download: a small base of MobileNet's blocks with random weights stands in for the
# pre-trained one (without the ImageNet classifier at the top).
base_input = keras.Input(shape=(32, 32, 3))
h = layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(base_input)
h = layers.ReLU(6.0)(layers.BatchNormalization()(h))
for filters in (16, 32):
    h = layers.DepthwiseConv2D(3, strides=2, padding="same", use_bias=False)(h)
    h = layers.ReLU(6.0)(layers.BatchNormalization()(h))
    h = layers.Conv2D(filters, 1, use_bias=False)(h)
    h = layers.ReLU(6.0)(layers.BatchNormalization()(h))
base_model = keras.Model(base_input, h, name="base")

# Freeze the base_model
base_model.trainable = False

# Create new model on top
inputs = keras.Input(shape=(32, 32, 3))
x = data_augmentation(inputs)  # Apply random data augmentation

# Pre-trained weights require that input be scaled
# from (0, 255) to a range of (-1., +1.), the rescaling layer
# outputs: `(inputs * scale) + offset`
scale_layer = keras.layers.Rescaling(scale=1 / 127.5, offset=-1)
x = scale_layer(x)

# The base model contains batchnorm layers. We want to keep them in inference mode
# when we unfreeze the base model for fine-tuning, so we make sure that the
# base_model is running in inference mode here.
x = base_model(x, training=False)
x = keras.layers.GlobalAveragePooling2D()(x)
x = keras.layers.Dropout(0.2)(x)  # Regularize with dropout
outputs = keras.layers.Dense(1)(x)
model = keras.Model(inputs, outputs)

# ## Train the top layer

model.compile(
    optimizer=keras.optimizers.Adam(),
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy()],
)

epochs = 2
top = model.fit(train_ds, epochs=epochs, validation_data=validation_ds)

# ## Do a round of fine-tuning of the entire model

# Unfreeze the base_model. Note that it keeps running in inference mode
# since we passed `training=False` when calling it. This means that
# the batchnorm layers will not update their batch statistics.
# This prevents the batchnorm layers from undoing all the training
# we've done so far.
base_model.trainable = True

model.compile(
    optimizer=keras.optimizers.Adam(1e-5),  # Low learning rate
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy()],
)

epochs = 2
fine = model.fit(train_ds, epochs=epochs, validation_data=validation_ds)
print("final:", repr([top.history, fine.history]))
