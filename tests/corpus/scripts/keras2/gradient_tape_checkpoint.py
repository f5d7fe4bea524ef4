# Written for spotfit's tests in the style of the TensorFlow 2.x guides "Writing a training loop
# from scratch" and "Training checkpoints" (tensorflow.org/guide/checkpoint: tf.train.Checkpoint
# with tf.train.CheckpointManager, restored at the start), tf.keras 2. Not a copy: the data are
# scikit-learn's digits, in digits.npz (no download).
"""A `GradientTape` loop in a `tf.function`, checkpointing itself each epoch and restoring at its start."""
from pathlib import Path

import numpy as np
import tensorflow as tf

digits = np.load(Path(__file__).with_name("digits.npz"))
train_dataset = tf.data.Dataset.from_tensor_slices(
    (digits["images"].reshape(-1, 64).astype("float32") / 16.0, digits["target"])).batch(64)  # 29 steps an epoch

model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu", input_shape=(64,)),
                             tf.keras.layers.Dense(10)])
optimizer = tf.keras.optimizers.SGD(learning_rate=1e-1)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = tf.keras.metrics.SparseCategoricalAccuracy()

ckpt = tf.train.Checkpoint(step=tf.Variable(0), optimizer=optimizer, net=model)
manager = tf.train.CheckpointManager(ckpt, "./tf_ckpts", max_to_keep=3)
ckpt.restore(manager.latest_checkpoint)
if manager.latest_checkpoint:
    print(f"Restored from {manager.latest_checkpoint}")
else:
    print("Initializing from scratch.")


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    train_acc_metric.update_state(y, logits)
    return loss_value


epochs = 3
for epoch in range(int(ckpt.step) // 29, epochs):
    for x_batch_train, y_batch_train in train_dataset:
        loss_value = train_step(x_batch_train, y_batch_train)
    ckpt.step.assign_add(29)
    save_path = manager.save()
    print(f"epoch {epoch}: loss {float(loss_value):.4f}, saved {save_path}")
weights_note = [w.numpy().sum() for w in model.weights]
print(f"final: iterations={int(optimizer.iterations.numpy())} weights={[float(w) for w in weights_note]!r}")
