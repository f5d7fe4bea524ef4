# Written for spotfit's tests in the style of the TensorFlow 2.x tutorial "Convolutional Neural
# Network (CNN)" (tensorflow.org/tutorials/images/cnn, TF 2.0-2.15, tf.keras 2). Not a copy: the
# data are scikit-learn's 8x8 digits, in digits.npz, each pixel repeated 2x2 into 16x16 (no download).
"""A Sequential CNN on NumPy arrays: Conv2D/MaxPooling2D, fit with validation_data, evaluate."""
from pathlib import Path

import numpy as np
import tensorflow as tf

digits = np.load(Path(__file__).with_name("digits.npz"))
images = np.kron(digits["images"], np.ones((2, 2)))[..., None].astype("float32") / 16.0
train_images, test_images = images[:1500], images[1500:]
train_labels, test_labels = digits["target"][:1500], digits["target"][1500:]

model = tf.keras.models.Sequential()
model.add(tf.keras.layers.Conv2D(16, (3, 3), activation="relu", input_shape=(16, 16, 1)))
model.add(tf.keras.layers.MaxPooling2D((2, 2)))
model.add(tf.keras.layers.Conv2D(32, (3, 3), activation="relu"))
model.add(tf.keras.layers.Flatten())
model.add(tf.keras.layers.Dense(32, activation="relu"))
model.add(tf.keras.layers.Dense(10))

model.compile(optimizer="adam",
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(train_images, train_labels, epochs=3, batch_size=64,
                    validation_data=(test_images, test_labels), verbose=2)
test_loss, test_acc = model.evaluate(test_images, test_labels, verbose=0)
print(f"final: loss={test_loss!r} acc={test_acc!r} val={history.history['val_loss']!r}")
