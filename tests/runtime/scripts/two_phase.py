"""Two `fit` calls (frozen base, then fine-tuned) with Keras's stateful callbacks (ModelCheckpoint
included) and two of the user's.

EarlyStopping ends each call early (its `min_delta` is larger than any improvement), so the
job's step count depends on the callbacks' counters; ReduceLROnPlateau and a multiplicative
LearningRateScheduler make the final weights depend on the learning rate's history.
"""

import json
import threading

import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x @ rng.normal(size=(8, 1)) + 0.3 * rng.normal(size=(256, 1))).astype("float32")
weights = rng.uniform(0.5, 1.5, size=256).astype("float32")

keras.utils.set_random_seed(1)
base = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dropout(0.2)])
model = keras.Sequential([base, keras.layers.Dense(1)])


class BatchCounter(keras.callbacks.Callback):
    """A user's callback without the protocol: its picklable attributes are saved, the lock is not."""

    def __init__(self):
        super().__init__()
        self.batches = 0
        self.lock = threading.Lock()

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


class LrLog(keras.callbacks.Callback):
    """A user's callback with the protocol."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_epoch_end(self, epoch, logs=None):
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))

    def get_state(self):
        return {"rates": self.rates}

    def set_state(self, state):
        self.rates = state["rates"]


def stop_early():
    return keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=100.0, patience=3, restore_best_weights=True)


counter, lr_log = BatchCounter(), LrLog()
# mode "max": the best is an early epoch, so a `best` lost at a later preemption would change.
best = keras.callbacks.ModelCheckpoint("best.weights.h5", monitor="val_loss", mode="max", save_best_only=True,
                                       save_weights_only=True)
base.trainable = False
model.compile(keras.optimizers.Adam(0.01), "mse")
first = model.fit(x, y, batch_size=16, epochs=6, validation_split=0.25, shuffle=True, verbose=0,
                  callbacks=[counter, stop_early(), keras.callbacks.CSVLogger("phase1.csv")])

base.trainable = True
model.compile(keras.optimizers.Adam(0.005), "mse")
second = model.fit(
    x, y, sample_weight=weights, batch_size=16, epochs=30, validation_split=0.25, shuffle=True, verbose=0,
    callbacks=[counter, lr_log, stop_early(),
               keras.callbacks.ReduceLROnPlateau(monitor="loss", min_delta=100.0, patience=1, factor=0.5),
               keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.9),
               keras.callbacks.CSVLogger("phase2.csv"), keras.callbacks.TensorBoard("tb", update_freq=1), best])
with open("summary.json", "w") as f:
    json.dump({"epochs": [len(first.epoch), len(second.epoch)], "batches": counter.batches, "rates": lr_log.rates,
               "lr": float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)),
               "best_val_loss": float(best.best)}, f)  # ModelCheckpoint's best survives the preemptions
