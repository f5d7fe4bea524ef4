"""The source documents' checkpoint advice, in tf.keras 2: `ModelCheckpoint(..., period=1)` to `.h5` weights.

As the documents wrote it (`filepath='./ckpt/model-{epoch:02d}.h5', save_weights_only=True,
period=1`), which Keras 3 refuses (no `period`; a weights file must end in `.weights.h5`);
`training.keras: auto` runs it on Keras 2. Changed: the data are generated here (no download).
spotfit's own checkpoints are what a preempted job resumes from; the script's `.h5` files are
written as in a plain run.
"""
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x_train = rng.random((1000, 20)).astype("float32")
y_train = (x_train[:, :5].sum(axis=1) > 2.5).astype("int32")

model = tf.keras.Sequential([
    tf.keras.layers.Dense(32, activation="relu", input_shape=(20,)),
    tf.keras.layers.Dense(2, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
checkpoint = tf.keras.callbacks.ModelCheckpoint(filepath="./ckpt/model-{epoch:02d}.h5", save_weights_only=True,
                                                period=1)
history = model.fit(x_train, y_train, batch_size=32, epochs=4, callbacks=[checkpoint])
print(f"final: loss={history.history['loss']!r}")
