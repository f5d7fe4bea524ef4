"""The source documents' monitoring advice, in tf.keras 2: `fit` with a `TensorBoard` callback.

As the documents wrote it (`log_dir` stamped with the start time, `histogram_freq=1`). Changed:
the data are the 8x8 digits in digits.npz beside it (scikit-learn's copy; no download). On Keras 2
spotfit does not write its own TensorBoard log; the script's is written as in a plain run
(`tensorboard --logdir logs/fit`), and on a resume spotfit removes from it the epochs and batches
that will be logged again.
"""
import datetime
from pathlib import Path

import numpy as np
import tensorflow as tf

digits = np.load(Path(__file__).with_name("digits.npz"))  # images, target
x_train, y_train = digits["images"][:1500] / 16.0, digits["target"][:1500]
x_test, y_test = digits["images"][1500:] / 16.0, digits["target"][1500:]

model = tf.keras.models.Sequential([
    tf.keras.layers.Flatten(input_shape=(8, 8)),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

log_dir = "logs/fit/" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
tensorboard_callback = tf.keras.callbacks.TensorBoard(log_dir=log_dir, histogram_freq=1)
history = model.fit(x=x_train, y=y_train, epochs=4, validation_data=(x_test, y_test),
                    callbacks=[tensorboard_callback])
print(f"final: loss={history.history['loss']!r} val={history.history['val_loss']!r}")
