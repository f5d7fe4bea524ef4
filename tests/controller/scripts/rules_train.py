"""A small digits MLP for the rules tests: learning rate, epochs and a starved pipeline are flags.

`--wait-for-stop-at STEP`: an attempt that starts at step 0 stands still at that global step
until the controller's stop request has reached it (the runtime's stop poll), so a rule that
fires before then stops the job at or before that step whatever the machine's speed. spotfit's
callback, which runs after this one, then stops at that very step. A resumed attempt does not
hold. Holding changes nothing in the training: the weights are those of a run without.
"""

import argparse
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--starve-ms", type=float, default=0.0, help="sleep per batch in the input pipeline")
parser.add_argument("--wait-for-stop-at", type=int, default=0, help="global step to wait at for a stop request")
parser.add_argument("--wait-timeout-s", type=float, default=300.0)
args = parser.parse_args()


class WaitForStop(keras.callbacks.Callback):
    def __init__(self, step: int, timeout_s: float):
        super().__init__()
        self.step, self.timeout_s, self.first_step = step, timeout_s, None

    # Nothing to carry over: spotfit checkpoints a callback's state (this protocol, else its
    # attributes), and a resumed attempt must find its own first step.
    def get_state(self):
        return {}

    def set_state(self, state):
        pass

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if self.first_step is None:  # the attempt's first step: spotfit has restored by now
            self.first_step = step
        if not self.step or step != self.step or self.first_step != 1:
            return
        from spotfit.runtime.custom_loop import active_session

        print(f"step {step}: waiting for the controller's stop request", flush=True)
        if not active_session().stop_asked.wait(self.timeout_s):
            raise SystemExit(f"timed out after {self.timeout_s:g}s waiting for a stop request at step {step}")

digits = np.load(Path(__file__).with_name("digits.npz"))
x = (digits["images"].reshape(-1, 64) / 16.0).astype("float32")
y = digits["target"].astype("int32")
keras.utils.set_random_seed(11)
model = keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(args.lr), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
train = tf.data.Dataset.from_tensor_slices((x[:1500], y[:1500])).batch(32)
if args.starve_ms:
    def slow(a, b):
        def wait(t):
            time.sleep(args.starve_ms / 1000.0)
            return t
        out = tf.numpy_function(wait, [a], tf.float32, stateful=True)
        out.set_shape(a.shape)
        return out, b
    train = train.map(slow)
model.fit(train, epochs=args.epochs, validation_data=(x[1500:], y[1500:]), verbose=2,
          callbacks=[WaitForStop(args.wait_for_stop_at, args.wait_timeout_s)])
print("final", model.evaluate(x[1500:], y[1500:], verbose=0))
