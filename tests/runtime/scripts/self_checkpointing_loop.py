"""A GradientTape loop that checkpoints itself (tf.train.CheckpointManager) and restores at its start."""
import hashlib
import json

import keras
import numpy as np
import tensorflow as tf

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.random((352, 8), dtype="float32")
y = (x.sum(axis=1) > 4).astype("int32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
optimizer = keras.optimizers.Adam(1e-2)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
epoch = tf.Variable(0, dtype=tf.int64)
ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch)
manager = tf.train.CheckpointManager(ckpt, "./tf_ckpt", max_to_keep=2)
if manager.latest_checkpoint:
    ckpt.restore(manager.latest_checkpoint)
    print("restored", manager.latest_checkpoint, "epoch", int(epoch.numpy()))
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)  # 22 steps an epoch
for e in range(int(epoch.numpy()), 3):
    for xb, yb in data:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    epoch.assign(e + 1)
    manager.save()
weights = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()
with open("out.json", "w") as f:
    json.dump({"iterations": int(optimizer.iterations.numpy()), "weights": weights}, f)
print("done", int(optimizer.iterations.numpy()), weights[:12])
