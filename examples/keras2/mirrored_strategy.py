"""The source documents' multi-GPU advice, in tf.keras 2: a `MirroredStrategy` the script creates, then `fit`.

As the documents wrote it (the model built and compiled in `strategy.scope()`, the batch size
scaled by the number of replicas). On Keras 2 spotfit adds no strategy: the script's own runs, on
every GPU the machine has (one replica on a CPU). Changed: the data are the 8x8 digits
in digits.npz beside it (scikit-learn's copy; no download).
"""
from pathlib import Path

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
print(f"Number of devices: {strategy.num_replicas_in_sync}")

digits = np.load(Path(__file__).with_name("digits.npz"))  # images, target
BATCH_SIZE_PER_REPLICA = 32
BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
dataset = tf.data.Dataset.from_tensor_slices((digits["images"][..., None] / 16.0, digits["target"]))
train_dataset = dataset.shuffle(2000, seed=0).batch(BATCH_SIZE)

with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(16, 3, activation="relu", input_shape=(8, 8, 1)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.Adam(), metrics=["accuracy"])

history = model.fit(train_dataset, epochs=3)
print(f"final: loss={history.history['loss']!r}")
