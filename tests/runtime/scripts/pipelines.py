"""Three small classifiers, one after the other, each fed by an input pipeline people write:

1. a `keras.utils.PyDataset` that reshuffles in `on_epoch_end` with its own RNG (and Keras
   shuffles its batch order too: `fit(shuffle=True)`), read by 2 worker threads: 4 x 20 steps;
2. an endless Python generator with `steps_per_epoch`: 4 x 15 steps;
3. arrays with `validation_split`, `class_weight`, `steps_per_execution=4` and the script's
   own `initial_epoch`: 5 x 16 steps.

`summary.json` gets each model's weights digest.
"""

import hashlib
import json

import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.normal(size=(320, 6)).astype("float32")
y = (x[:, 0] + 0.5 * x[:, 1] + 0.5 * rng.normal(size=320) > 0).astype("int32")
keras.utils.set_random_seed(3)


def classifier(steps_per_execution=1):
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(12, activation="relu"),
                              keras.layers.Dropout(0.1), keras.layers.Dense(2, activation="softmax")])
    model.compile(keras.optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy",
                  steps_per_execution=steps_per_execution)
    return model


def digest(model):
    return hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()


class Batches(keras.utils.PyDataset):
    def __init__(self, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.batch_size = batch_size
        self.rng = np.random.default_rng(11)
        self.order = np.arange(len(x))

    def __len__(self):
        return len(x) // self.batch_size

    def __getitem__(self, i):
        rows = self.order[i * self.batch_size:(i + 1) * self.batch_size]
        return x[rows], y[rows]

    def on_epoch_end(self):
        self.order = self.rng.permutation(len(x))


def batches_forever(batch_size):
    gen = np.random.default_rng(5)
    while True:
        rows = gen.integers(0, len(x), size=batch_size)
        yield x[rows], y[rows]


digests = []
model = classifier()
model.fit(Batches(16, workers=2), epochs=4, verbose=0)
digests.append(digest(model))

model = classifier()
model.fit(batches_forever(16), steps_per_epoch=15, epochs=4, verbose=0)
digests.append(digest(model))

model = classifier(steps_per_execution=4)
model.fit(x, y, batch_size=16, epochs=6, initial_epoch=1, validation_split=0.2, class_weight={0: 1.0, 1: 3.0},
          shuffle=True, verbose=0)
digests.append(digest(model))
with open("summary.json", "w") as f:
    json.dump({"digests": digests}, f)
