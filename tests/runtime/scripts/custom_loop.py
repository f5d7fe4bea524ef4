"""A `tf.GradientTape` training loop over a reshuffling tf.data pipeline, through `spotfit.loop`."""

import hashlib
import json

import keras
import numpy as np
import tensorflow as tf

import spotfit

rng = np.random.default_rng(0)
x = rng.normal(size=(192, 5)).astype("float32")
y = (x @ rng.normal(size=(5, 1))).astype("float32")

keras.utils.set_random_seed(2)
model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dropout(0.1),
                          keras.layers.Dense(1)])
optimizer = keras.optimizers.Adam(0.01)
loss_fn = keras.losses.MeanSquaredError()
train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(192, seed=4).batch(16)  # 12 batches a pass


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


for _step, (xb, yb) in spotfit.loop(model, train, steps=60, optimizer=optimizer):
    train_step(xb, yb)

with open("summary.json", "w") as f:
    json.dump({"digest": hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()}, f)
