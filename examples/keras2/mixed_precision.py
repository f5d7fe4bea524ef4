"""The source documents' mixed-precision advice, in tf.keras 2: `mixed_float16` with a float32 output layer.

As the documents wrote it: the global policy set to `mixed_float16`, the model's last layer (the
softmax) in float32 for numeric stability, and Keras's loss scaling through `compile`. On Keras 2
spotfit keeps the script's policy (and applies none of its own). Changed: the data are generated
here, and the model is small (float16 is emulated, slowly, on a CPU: a GPU of compute capability
7.0 or more runs it fast).
"""
import numpy as np
import tensorflow as tf
from tensorflow.keras import layers, mixed_precision

mixed_precision.set_global_policy("mixed_float16")

rng = np.random.default_rng(1)
x_train = rng.random((800, 64)).astype("float32")
y_train = (x_train[:, :8].sum(axis=1) > 4).astype("int32")

inputs = tf.keras.Input(shape=(64,), name="digits")
x = layers.Dense(64, activation="relu", name="dense_1")(inputs)
x = layers.Dense(64, activation="relu", name="dense_2")(x)
x = layers.Dense(2, name="dense_logits")(x)
outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
model = tf.keras.Model(inputs=inputs, outputs=outputs)
model.compile(loss="sparse_categorical_crossentropy", optimizer=tf.keras.optimizers.RMSprop(),
              metrics=["accuracy"])
history = model.fit(x_train, y_train, batch_size=32, epochs=3)
print(f"final: loss={history.history['loss']!r} policy={model.layers[1].dtype_policy.name}")
