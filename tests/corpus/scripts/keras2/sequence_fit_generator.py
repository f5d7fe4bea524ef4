# Written for spotfit's tests in the style of TensorFlow 2.0-era code that fed `fit_generator` from a
# `tf.keras.utils.Sequence` (the `keras.utils.Sequence` docstring's example), with a legacy optimizer
# and ModelCheckpoint(period=1) to `.h5` weights: everything here is Keras 2's API. Data generated here.
"""`fit_generator` on a Sequence that reshuffles in `on_epoch_end`, legacy SGD(lr=, momentum=), period=1;
then `fit` on a Python generator that draws its batches from NumPy's global RNG."""
import math

import numpy as np
import tensorflow as tf

np.random.seed(11)
x_all = np.random.rand(600, 10).astype("float32")
y_all = (x_all @ np.linspace(-1, 1, 10) > 0).astype("float32")


class ShuffledSequence(tf.keras.utils.Sequence):
    def __init__(self, x_set, y_set, batch_size):
        self.x, self.y = x_set, y_set
        self.batch_size = batch_size
        self.indices = np.arange(len(self.x))

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, idx):
        batch = self.indices[idx * self.batch_size:(idx + 1) * self.batch_size]
        return self.x[batch], self.y[batch]

    def on_epoch_end(self):
        np.random.shuffle(self.indices)


model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(10,)),
                             tf.keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=tf.keras.optimizers.legacy.SGD(lr=0.05, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
checkpoint = tf.keras.callbacks.ModelCheckpoint("weights-{epoch:02d}.h5", save_weights_only=True, period=1)
history = model.fit_generator(ShuffledSequence(x_all, y_all, 25), epochs=4, callbacks=[checkpoint], verbose=2)


def batches(batch_size=50):
    while True:
        rows = np.random.choice(len(x_all), batch_size, replace=False)
        yield x_all[rows], y_all[rows]


more = model.fit(batches(), steps_per_epoch=12, epochs=2, verbose=2)
print(f"final: loss={history.history['loss']!r} acc={history.history['accuracy']!r} more={more.history['loss']!r}")
