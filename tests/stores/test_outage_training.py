"""SeaweedFS goes away while a checkpoint is being written: training goes on, saves resume.

A real attempt (`python -m spotfit.runtime`) trains with its checkpoints on SeaweedFS. At step
30, just as the checkpoint of that step is due, the test stops the server (by PID) and starts
it again 8 s later on the same ports. The save of step 30 fails and is recorded; training does
not stop; later saves succeed once the server is back; every checkpoint that can be restored
is complete and verified.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from seaweed import BUCKET, SeaweedServer, require_weed, seaweed_env
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.runtime.config import RuntimeConfig
from spotfit.stores import open_store

pytestmark = pytest.mark.slow
# Longer than the store's whole retry budget (~4 s): the save itself must meet the outage.
OUTAGE_S = 8.0

SCRIPT = '''
import os, time
from pathlib import Path
import keras
from sklearn.datasets import load_digits

marks = Path(os.environ["OUTAGE_MARKS"])

class Outage(keras.callbacks.Callback):
    """Runs before spotfit's callback: the server goes down right before the save of step 30."""
    step = 0
    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step == 30:
            (marks / "stop-request").touch()
            deadline = time.monotonic() + 60
            while not (marks / "stopped").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        elif self.step > 30:
            time.sleep(0.06)  # long enough for the server to come back before the end

digits = load_digits()
x = (digits.images.astype("float32") / 16.0)[..., None][:1500]
y = digits.target.astype("int32")[:1500]
keras.utils.set_random_seed(7)
model = keras.Sequential([keras.Input(shape=(8, 8, 1)), keras.layers.Flatten(),
                          keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=32, epochs=4, shuffle=True, verbose=0, callbacks=[Outage()])
'''


def test_server_outage_during_a_checkpoint_write(tmp_path):
    server = SeaweedServer(tmp_path / "seaweed", require_weed())
    server.start()
    env = {**os.environ, **seaweed_env(server)}
    os.environ.update(seaweed_env(server))
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    url = f"s3://{BUCKET}/outage-{uuid.uuid4().hex[:6]}"
    store = open_store(url)
    config = RuntimeConfig(job_id="outage", job_url=url, script=str(script), workdir=str(tmp_path),
                           interval_steps=10, keep=2, heartbeat_s=0.2)
    store.write_bytes("attempts/0001/runtime.json", config.to_json().encode())
    down_s = []

    def outage():
        deadline = time.monotonic() + 180
        while not (marks / "stop-request").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        t0 = time.monotonic()
        server.stop()
        (marks / "stopped").touch()
        time.sleep(OUTAGE_S)
        server.start()
        down_s.append(time.monotonic() - t0)

    thread = threading.Thread(target=outage, daemon=True)
    thread.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "spotfit.runtime", url, "1"], env={**env, "OUTAGE_MARKS": str(marks)},
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        thread.join(timeout=60)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert down_s and down_s[0] >= OUTAGE_S

        events = [json.loads(store.read_bytes(k)) for k in store.list("events")]
        kinds = [(e["kind"], e["data"].get("step")) for e in events if e["kind"].startswith("checkpoint")]
        failed = [step for kind, step in kinds if kind == "checkpoint_failed"]
        saved = [step for kind, step in kinds if kind == "checkpoint"]
        assert failed and failed[0] == 30, kinds  # the save that the outage hit
        assert saved[-1] == 188 and [s for s in saved if s > max(failed)], kinds  # retried when back
        assert "store unreachable" in proc.stderr

        ckpts = CheckpointStore(store, keep=2)
        for step in ckpts.steps():  # everything that looks like a checkpoint is complete
            assert ckpts._load(step).step == step
        latest = ckpts.load_latest()
        assert latest.step == 188 and latest.skipped == []
        assert json.loads(store.read_bytes("result.json"))["step"] == 188
    finally:
        server.stop()
