"""A small digits MLP for the replayed-market tests; `--wait-for-market-at 40,90` holds there.

`--pause-at STEP --pause-dir D`: the first process to reach STEP writes `D/paused` and waits
for `D/go` before it trains on (a test kills or restarts the controller meanwhile).

At each step of `--wait-for-market-at`, the training stands still until SIGTERM (the replayed
market's preemption notice, forwarded by the backend) arrives: so the job meets a market
preemption at each of those steps whatever the machine's speed. spotfit's own SIGTERM handler
still runs (it is chained), and spotfit's callback, which runs after this one, then saves at
that step and exits "preempted". A resumed attempt starts after the step and does not hold
there again. Holding changes nothing in the training: the weights are those of a run without.
"""

import argparse
import signal
import threading
import time
from pathlib import Path

import keras
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--wait-for-market-at", default="", help="comma-separated global steps")
parser.add_argument("--wait-timeout-s", type=float, default=300.0)
parser.add_argument("--pause-at", type=int, default=0)
parser.add_argument("--pause-dir", default="")
args = parser.parse_args()


class WaitForMarket(keras.callbacks.Callback):
    def __init__(self, steps: set[int], timeout_s: float):
        super().__init__()
        self.steps, self.timeout_s = steps, timeout_s
        self.notice = threading.Event()

    def on_train_begin(self, logs=None):
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum, frame):
            self.notice.set()
            if callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGTERM, on_sigterm)

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step not in self.steps or self.notice.is_set():
            return
        print(f"step {step}: waiting for the market to preempt this attempt", flush=True)
        deadline = time.monotonic() + self.timeout_s
        while not self.notice.wait(0.05):
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out after {self.timeout_s:g}s waiting for a market preemption "
                                 f"at step {step}")


class PauseAt(keras.callbacks.Callback):
    def __init__(self, step: int, folder: Path):
        super().__init__()
        self.step, self.folder = step, folder

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) != self.step or (self.folder / "paused").exists():
            return
        (self.folder / "paused").write_text(str(self.step))
        deadline = time.monotonic() + 300
        while not (self.folder / "go").exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"the test never created {self.folder / 'go'}")
            time.sleep(0.05)


digits = np.load(Path(__file__).with_name("digits.npz"))
x = (digits["images"].reshape(-1, 64) / 16.0).astype("float32")
y = digits["target"].astype("int32")
keras.utils.set_random_seed(5)
model = keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
hold = {int(s) for s in args.wait_for_market_at.split(",") if s}
model.fit(x[:1500], y[:1500], batch_size=32, epochs=args.epochs, shuffle=True,
          validation_data=(x[1500:], y[1500:]), verbose=2,
          callbacks=[WaitForMarket(hold, args.wait_timeout_s),
                     *([PauseAt(args.pause_at, Path(args.pause_dir))] if args.pause_at else [])])
print("final", model.evaluate(x[1500:], y[1500:], verbose=0))
