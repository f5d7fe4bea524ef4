# Copyright 2020 The Keras Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0).
#
# Adapted from keras-io, examples/vision/image_classification_from_scratch.py: "Image
# classification from scratch", by fchollet. Changed: the data (scikit-learn's 8x8 digits, in digits.npz,
# each pixel repeated 2x2 into a 16x16 RGB image scaled to 0-255, label 1 for digits 5-9, instead
# of the Cats vs Dogs download read by `image_dataset_from_directory`; 384 train / 128 validation
# images, shuffled by a seeded permutation), the sizes (filters 8/16 in the entry block instead of
# 32/64, blocks of 16 and 32 instead of 128 to 728, 64 instead of 1024 at the end, batches of 32,
# 3 epochs instead of 25), no plots and no inference on a file, and a last `final:` line with the
# last epoch's metrics and the validation predictions' sum for the tests. The augmentation applied
# in the `tf.data` pipeline, the small Xception-like model, ModelCheckpoint, and compile with
# `jit_compile=True` are the example's.
"""`tf.data` augmentation (random flips and rotations) and `compile(jit_compile=True)`."""

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from keras import layers

# ## Generate a `Dataset` (from the bundled digits: no download)

image_size = (16, 16)
batch_size = 32

digits = np.load(Path(__file__).with_name("digits.npz"))
order = np.random.default_rng(1337).permutation(len(digits["images"]))[:512]
images = np.kron(digits["images"][order], np.ones((2, 2)))[..., None].repeat(3, axis=-1) * (255.0 / 16)
labels = (digits["target"][order] >= 5).astype("int64")
train_ds = tf.data.Dataset.from_tensor_slices((images[:384].astype("float32"), labels[:384])).batch(batch_size)
val_ds = tf.data.Dataset.from_tensor_slices((images[384:].astype("float32"), labels[384:])).batch(batch_size)

# ## Using image data augmentation

data_augmentation = keras.Sequential(
    [
        layers.RandomFlip("horizontal"),
        layers.RandomRotation(0.1),
    ]
)

# ## Configure the dataset for performance

train_ds = train_ds.prefetch(buffer_size=32)
val_ds = val_ds.prefetch(buffer_size=32)

# ## Build a model


def make_model(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)

    # Entry block
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(8, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    x = layers.Conv2D(16, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    previous_block_activation = x  # Set aside residual

    for size in [16, 32]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)

        # Project residual
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(
            previous_block_activation
        )
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    x = layers.SeparableConv2D(64, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    x = layers.GlobalAveragePooling2D()(x)
    if num_classes == 2:
        activation = "sigmoid"
        units = 1
    else:
        activation = "softmax"
        units = num_classes

    x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(units, activation=activation)(x)
    return keras.Model(inputs, outputs)


model = make_model(input_shape=image_size + (3,), num_classes=2)

# Apply `data_augmentation` to the training images.
train_ds = train_ds.map(
    lambda img, label: (data_augmentation(img), label),
    num_parallel_calls=tf.data.AUTOTUNE,
)
# Prefetching samples in GPU memory helps maximize GPU utilization.
train_ds = train_ds.prefetch(tf.data.AUTOTUNE)

# ## Train the model

epochs = 3

callbacks = [
    keras.callbacks.ModelCheckpoint("save_at_{epoch}.keras"),
]
model.compile(
    optimizer=keras.optimizers.Adam(1e-3),
    loss="binary_crossentropy",
    metrics=["accuracy"],
    jit_compile=True,  # Enable XLA compilation for faster execution
)
history = model.fit(
    train_ds,
    epochs=epochs,
    callbacks=callbacks,
    validation_data=val_ds,
)

print("final:", repr([{k: v[-1] for k, v in history.history.items()},
                      float(model.predict(val_ds, verbose=0).sum())]))
