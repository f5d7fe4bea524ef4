"""The script both sides of bench_runtime.py run: a plain Keras conv net, timed around `fit`.

`BENCH_MODEL=small` (default): a small conv net on digits (8x8, batch 32, 57 steps per epoch,
~5-10 ms steps on 2 CPU cores). `BENCH_MODEL=mlp`: a small MLP on the same digits, flattened
(batch 32, ~2-3 ms steps), where a fixed cost per step weighs most. `BENCH_MODEL=large`: a wider
conv net on 32x32x3 random images (batch 64, 64 steps per epoch, ~60-80 ms steps). `BENCH_EPOCHS`
overrides the epochs.

It times the whole `model.fit` call from outside (so everything spotfit does inside it counts:
tracing, `auto`'s trials, checkpoint saves, the final save) and writes to $BENCH_OUT, per step:
`s_per_step` (wall) and `cpu_s_per_step` (CPU seconds of the whole process, every thread:
spotfit's heartbeat, TensorBoard writer and samplers included), both over every step, and the
same after the first epoch (`*_steady`). Its only callback acts at epoch ends: a batch-level
callback would turn off Keras's asynchronous batch-end dispatch, which a plain script without
callbacks gets.

It also accounts for where CPU time goes during `fit`, on both sides alike: `batch_end_cpu_s`
(and its median per step), the CPU seconds of Keras's batch-end callback dispatch (every
callback's `on_train_batch_end`, in whichever thread Keras runs it; saves at a batch end
included), and `thread_cpu_s`, each Python thread's CPU seconds other
than the main thread's (spotfit's heartbeat, TensorBoard writer, samplers), read from the
threads' own CPU clocks, which other load does not inflate.
"""

import json
import os
import threading
import time
from pathlib import Path

import keras
import numpy as np
from keras.src.callbacks.callback_list import CallbackList

_batch_end = CallbackList._on_train_batch_end
batch_end_cpu: list[float] = []  # appended from any thread (Keras may dispatch batch ends to a pool)


def _timed_batch_end(self, batch, logs=None):
    t0 = time.thread_time()
    _batch_end(self, batch, logs)
    batch_end_cpu.append(time.thread_time() - t0)


CallbackList._on_train_batch_end = _timed_batch_end


def thread_cpu() -> dict[str, float]:
    """CPU seconds of every live Python thread but the main one, by name."""
    out = {}
    for t in threading.enumerate():
        if t is not threading.main_thread() and t.ident is not None:
            try:
                out[t.name] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except OSError:  # ended meanwhile
                continue
    return out


class EpochClock(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.marks = []  # (wall, cpu) at each epoch end

    def on_epoch_end(self, epoch, logs=None):
        self.marks.append((time.perf_counter(), time.process_time()))


keras.utils.set_random_seed(3)
MODEL = os.environ.get("BENCH_MODEL", "small")
if MODEL != "large":
    # The digits of examples/digits (the spotfit attempt runs this file where it lies).
    digits = np.load(Path(__file__).resolve().parents[1] / "examples" / "digits" / "digits.npz")
    x = (digits["images"].astype("float32") / 16.0)[..., None]
    y = digits["target"].astype("int32")
if MODEL == "large":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, 4096).astype("int32")
    batch_size, default_epochs = 64, 5
    model = keras.Sequential([
        keras.Input(shape=(32, 32, 3)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(128, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10, activation="softmax"),
    ])
elif MODEL == "mlp":
    x = x.reshape(-1, 64)
    batch_size, default_epochs = 32, 16
    model = keras.Sequential([
        keras.Input(shape=(64,)),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
else:
    batch_size, default_epochs = 32, 8
    model = keras.Sequential([
        keras.Input(shape=(8, 8, 1)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
clock = EpochClock()
epochs = int(os.environ.get("BENCH_EPOCHS", default_epochs))
threads0 = thread_cpu()
t0, c0 = time.perf_counter(), time.process_time()
history = model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=True, callbacks=[clock], verbose=0)
t1, c1 = time.perf_counter(), time.process_time()
threads1 = thread_cpu()
steps_per_epoch = -(-len(x) // batch_size)
steps = steps_per_epoch * epochs
after_first = steps - steps_per_epoch
out = {
    "steps": steps,
    "s_per_step": (t1 - t0) / steps,
    "cpu_s_per_step": (c1 - c0) / steps,
    "s_per_step_steady": (t1 - clock.marks[0][0]) / after_first if after_first else None,
    "cpu_s_per_step_steady": (c1 - clock.marks[0][1]) / after_first if after_first else None,
    "batch_end_cpu_s": sum(batch_end_cpu),
    "batch_end_cpu_s_median": sorted(batch_end_cpu)[len(batch_end_cpu) // 2],
    "thread_cpu_s": {name: cpu - threads0.get(name, 0.0) for name, cpu in threads1.items()},
}
with open(os.environ["BENCH_OUT"], "w") as f:
    json.dump(out, f)
