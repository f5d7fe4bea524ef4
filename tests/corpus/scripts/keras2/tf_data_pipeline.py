# Written for spotfit's tests in the style of the TensorFlow 2.x guide "Better performance with
# the tf.data API" and the tutorial "Load and preprocess images" (tensorflow.org, tf.keras 2).
# Not a copy: the images are scikit-learn's digits, in digits.npz (no download).
"""A `tf.data` pipeline with `.map().cache().shuffle().batch().prefetch(AUTOTUNE)`, reshuffled each epoch."""
from pathlib import Path

import numpy as np
import tensorflow as tf

digits = np.load(Path(__file__).with_name("digits.npz"))
AUTOTUNE = tf.data.AUTOTUNE


def normalize(image, label):
    return tf.cast(image, tf.float32) / 16.0, label


def configure_for_performance(ds):
    ds = ds.cache()
    ds = ds.shuffle(buffer_size=1000)
    ds = ds.batch(32)
    ds = ds.prefetch(buffer_size=AUTOTUNE)
    return ds


full = tf.data.Dataset.from_tensor_slices((digits["images"][..., None], digits["target"])).map(normalize)
train_ds = configure_for_performance(full.take(1400))
val_ds = full.skip(1400).batch(32).cache().prefetch(AUTOTUNE)

model = tf.keras.Sequential([
    tf.keras.layers.Flatten(input_shape=(8, 8, 1)),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10)])
model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(train_ds, validation_data=val_ds, epochs=3, verbose=2)
print(f"final: loss={history.history['loss']!r} val={history.history['val_loss']!r}")
