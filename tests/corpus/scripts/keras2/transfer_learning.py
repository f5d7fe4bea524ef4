# Written for spotfit's tests in the style of the TensorFlow 2.x tutorial "Transfer learning and
# fine-tuning" (tensorflow.org/tutorials/images/transfer_learning, tf.keras 2). Not a copy: the base
# is a small CNN trained here on the digits 0-4 (no ImageNet download); the new head learns 5-9.
"""A frozen base and a new head, then fine-tuning with a lower `lr=`: three fit calls, two compiles."""
from pathlib import Path

import numpy as np
import tensorflow as tf

digits = np.load(Path(__file__).with_name("digits.npz"))
images = digits["images"][..., None].astype("float32") / 16.0
first, second = digits["target"] < 5, digits["target"] >= 5

base_model = tf.keras.Sequential([
    tf.keras.layers.Conv2D(16, 3, activation="relu", input_shape=(8, 8, 1)),
    tf.keras.layers.Conv2D(16, 3, activation="relu"),
    tf.keras.layers.GlobalAveragePooling2D()], name="base")
pretrain = tf.keras.Sequential([base_model, tf.keras.layers.Dense(5)])
pretrain.compile(optimizer=tf.keras.optimizers.Adam(lr=1e-2),
                 loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
pretrain.fit(images[first], digits["target"][first], epochs=2, batch_size=64, verbose=2)

base_model.trainable = False
inputs = tf.keras.Input(shape=(8, 8, 1))
features = base_model(inputs, training=False)
outputs = tf.keras.layers.Dense(5)(features)
model = tf.keras.Model(inputs, outputs)
base_learning_rate = 1e-2
model.compile(optimizer=tf.keras.optimizers.Adam(lr=base_learning_rate),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
x, y = images[second], digits["target"][second] - 5
initial_epochs = 2
history = model.fit(x, y, epochs=initial_epochs, batch_size=64, validation_split=0.2, verbose=2)

base_model.trainable = True
model.compile(optimizer=tf.keras.optimizers.RMSprop(lr=base_learning_rate / 10),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
history_fine = model.fit(x, y, epochs=initial_epochs + 2, initial_epoch=history.epoch[-1] + 1, batch_size=64,
                         validation_split=0.2, verbose=2)
print(f"final: loss={history_fine.history['loss']!r} val={history_fine.history['val_accuracy']!r}")
