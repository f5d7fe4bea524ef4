"""tf.keras 2 code as the TensorFlow 2.x tutorials wrote it: `lr=`, ModelCheckpoint(period=1) to .h5 weights,
Dropout on a tf.random.Generator, ReduceLROnPlateau and EarlyStopping, and two fit calls (arrays, then a
tf.data pipeline that reshuffles each epoch). 40 steps."""
import hashlib
import json
import sys

import numpy as np
import tensorflow as tf

tf.keras.backend.experimental.enable_tf_random_generator()  # Dropout's draws are state a checkpoint holds
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.random((320, 8), dtype="float32")
y = (x.sum(axis=1) > 4).astype("int32")
model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
                             tf.keras.layers.Dropout(0.2),
                             tf.keras.layers.Dense(2)])
model.compile(optimizer=tf.keras.optimizers.Adam(lr=1e-2),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
callbacks = [tf.keras.callbacks.ModelCheckpoint("model-{epoch:02d}.h5", save_weights_only=True, period=1),
             tf.keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=1, factor=0.5),
             tf.keras.callbacks.EarlyStopping(monitor="loss", patience=10)]
model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=callbacks)
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(320, seed=1).batch(32)
history = model.fit(ds, epochs=4, initial_epoch=2, verbose=0, callbacks=callbacks)
weights = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()
with open("out.json", "w") as f:
    json.dump({"weights": weights, "iterations": int(model.optimizer.iterations.numpy()),
               "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
               "model": type(model).__module__, "keras_3_loaded": "keras" in sys.modules}, f)
print("done", weights[:12])
