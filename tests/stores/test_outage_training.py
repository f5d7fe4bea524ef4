"""SeaweedFS goes away while a checkpoint is being written: training goes on, saves resume.

A real attempt (`python -m spotfit.runtime`) trains with its checkpoints on SeaweedFS. The
script and the test hand the outage back and forth through marker files, so that its place in
the training is fixed, whatever the machine's speed:

- at step 30, just before spotfit saves that step, the script asks for the outage and waits
  until the test has stopped the server (by PID);
- steps 31-40 train on with the server down: the saves of steps 30 and 40 fail;
- at step 41 the script waits until the test has started the server again on the same ports;
- the saves from step 50 on succeed, and every checkpoint that can be restored is complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid

import pytest

from spotfit.attempt.config import RuntimeConfig
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.stores import open_store
from tests.support.seaweed import BUCKET
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
DOWN_AT, UP_AT, TOTAL = 30, 41, 188  # steps; 1500 samples / 32 = 47 steps x 4 epochs

SCRIPT = '''
import os, time
from pathlib import Path
import keras
from sklearn.datasets import load_digits

marks = Path(os.environ["OUTAGE_MARKS"])
down_at, up_at = (int(s) for s in os.environ["OUTAGE_STEPS"].split(","))


def wait_for_mark(name):
    deadline = time.monotonic() + 300
    while not (marks / name).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after 300s waiting for the test to write {name}")
        time.sleep(0.02)


class Outage(keras.callbacks.Callback):
    """Runs before spotfit's callback: the server is down from before the save of step 30
    until after the save of step 40."""
    step = 0
    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step == down_at:
            (marks / "stop-request").touch()
            wait_for_mark("stopped")
        elif self.step == up_at:
            (marks / "start-request").touch()
            wait_for_mark("started")

digits = load_digits()
x = (digits.images.astype("float32") / 16.0)[..., None][:1500]
y = digits.target.astype("int32")[:1500]
keras.utils.set_random_seed(7)
model = keras.Sequential([keras.Input(shape=(8, 8, 1)), keras.layers.Flatten(),
                          keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=32, epochs=4, shuffle=True, verbose=0, callbacks=[Outage()])
'''


def test_server_outage_during_a_checkpoint_write(tmp_path, own_seaweed):
    server = own_seaweed
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    url = f"s3://{BUCKET}/outage-{uuid.uuid4().hex[:6]}"
    store = open_store(url)
    config = RuntimeConfig(job_id="outage", job_url=url, script=str(script), workdir=str(tmp_path),
                           interval_steps=10, keep=2, heartbeat_s=1.0)
    store.write_bytes("attempts/0001/runtime.json", config.to_json().encode())
    proc = subprocess.Popen([sys.executable, "-m", "spotfit.runtime", url, "1"],
                            env={**os.environ, "OUTAGE_MARKS": str(marks), "OUTAGE_STEPS": f"{DOWN_AT},{UP_AT}"},
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    output: dict[str, str] = {}
    reader = threading.Thread(target=lambda: output.update(zip(("out", "err"), proc.communicate(), strict=True)),
                              daemon=True)
    reader.start()
    try:
        for request, done, action in (("stop-request", "stopped", server.stop),
                                      ("start-request", "started", server.start)):
            wait_for(lambda request=request: (marks / request).exists() or proc.poll() is not None, 300,
                     f"the training to reach the step that asks for {request}")
            assert proc.poll() is None, f"the runtime exited early: {output}"
            action()
            (marks / done).touch()
        wait_for(lambda: proc.poll() is not None, 300, "the training to finish")
        reader.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output.get("err", "")[-3000:]

    events = [json.loads(store.read_bytes(k)) for k in store.list("events")]
    kinds = [(e["kind"], e["data"].get("step")) for e in events if e["kind"].startswith("checkpoint")]
    failed = [step for kind, step in kinds if kind == "checkpoint_failed"]
    saved = [step for kind, step in kinds if kind == "checkpoint"]
    assert failed == [30, 40], kinds  # every save while the server was down, and only those
    assert saved == [10, 20, *range(50, TOTAL, 10), TOTAL], kinds  # every save once it was back
    assert "store unreachable" in output["err"]

    ckpts = CheckpointStore(store, keep=2)
    for step in ckpts.steps():  # everything that looks like a checkpoint is complete
        assert ckpts._load(step).step == step
    latest = ckpts.load_latest()
    assert latest.step == TOTAL and latest.skipped == []
    assert json.loads(store.read_bytes("result.json"))["step"] == TOTAL
