"""The job's S3 store goes away for 60 s mid-training: the controller and the training carry on.

`spotfit run` drives a real attempt whose checkpoints, progress and events live on SeaweedFS.
The script and the test hand the outage back and forth through marker files, so its place in
the training is fixed whatever the machine's speed: at step 30 the script asks for the outage
and waits until the server is stopped (by PID); it trains on with the server away; at step 41
it asks for the server back and waits until the test has started it again, 60 s after it
stopped. The job must then finish with the weights of an uninterrupted run, with the outage
recorded as events and shown by `status` while it lasted, and never `controller: gone`.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid

import pytest

from spotfit import sdk
from spotfit.errors import NotFoundError
from tests.support.jobs import spotfit_cmd
from tests.support.seaweed import BUCKET
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
OUTAGE_S = 60.0  # the outage the issue asks the controller to survive

SCRIPT = '''
import os, time
from pathlib import Path
import keras
from sklearn.datasets import load_digits


class Outage(keras.callbacks.Callback):
    """The server is away from step 30 until the test brings it back at step 41 (no-op without marks)."""
    step = 0
    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        marks = os.environ.get("OUTAGE_MARKS")
        if marks and self.step in (30, 41):
            request, done = ("stop-request", "stopped") if self.step == 30 else ("start-request", "started")
            (Path(marks) / request).touch()
            deadline = time.monotonic() + 600
            while not (Path(marks) / done).exists():
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out waiting for the test to write {done}")
                time.sleep(0.02)

digits = load_digits()
x = (digits.images.astype("float32") / 16.0)[..., None][:1500]
y = digits.target.astype("int32")[:1500]
model = keras.Sequential([keras.Input(shape=(8, 8, 1)), keras.layers.Flatten(),
                          keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=32, epochs=4, shuffle=True, verbose=0, callbacks=[Outage()])
'''
SPEC = """name: {name}
script: train.py
market: {{trace: aws-v100, zones: [us-west-2a], start: '2023-02-17T19:16:00', time_scale: 10}}
checkpoint: {{interval: {{steps: 10}}, keep: 2{store}}}
training: {{seed: 7, deterministic: true}}
env: {env}
"""


def _start(job_spec, tmp_path, name: str, store: str = "", env: dict | None = None) -> subprocess.Popen:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    spec = job_spec(SPEC.format(name=name, store=store, env=json.dumps(env or {})), name,
                    script=tmp_path / "src" / "train.py")
    return subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL, env=os.environ.copy())


def _status(name: str) -> dict:
    """`spotfit status NAME --json`, in this process (the same SPOTFIT_HOME); {} before the job exists."""
    try:
        return sdk.status(name)
    except NotFoundError:
        return {}


def test_the_job_survives_a_60s_s3_outage_with_the_uninterrupted_weights(job_spec, tmp_path, own_seaweed):
    server = own_seaweed
    marks = tmp_path / "marks"
    marks.mkdir()
    store = f", store: 's3://{BUCKET}/outage-{uuid.uuid4().hex[:6]}'"
    job = _start(job_spec, tmp_path, "outage", store, {"OUTAGE_MARKS": str(marks)})
    output: dict[str, str] = {}
    reader = threading.Thread(target=lambda: output.update(zip(("out", "err"), job.communicate(), strict=True)),
                              daemon=True)
    reader.start()
    reference: subprocess.Popen | None = None  # the uninterrupted run
    try:
        wait_for(lambda: (marks / "stop-request").exists() or job.poll() is not None, 300,
                 "the training to reach step 30, where it asks for the outage")
        assert job.poll() is None, output
        server.stop()
        stopped_at = time.monotonic()
        (marks / "stopped").touch()
        # The uninterrupted run trains meanwhile, on the default file:// store.
        reference = _start(job_spec, tmp_path, "reference")
        wait_for(lambda: _status("outage").get("store_problem") or job.poll() is not None, 120,
                 "`status` to report the store outage")
        assert job.poll() is None, f"spotfit run ended during the outage: {output}"
        assert "does not answer" in _status("outage")["store_problem"]
        wait_for(lambda: (marks / "start-request").exists() or job.poll() is not None, 300,
                 "the training to reach step 41, where it asks for the server back")
        ref_out, ref_err = reference.communicate(timeout=300)
        assert reference.returncode == 0, ref_err[-3000:]
        during = _status("outage")
        assert during["controller"] == "alive" and during["state"] == "running", during
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped_at)))  # the outage lasts 60 s
        server.start()
        (marks / "started").touch()
        wait_for(lambda: job.poll() is not None, 300, "the job to finish after the store came back")
        reader.join(timeout=60)
    finally:
        for proc in (job, reference):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert job.returncode == 0, output.get("err", "")[-3000:]
    doc = json.loads(output["out"])
    uninterrupted = json.loads(ref_out)
    assert doc["state"] == "completed" and doc["controller"] == "finished"
    assert [a["state"] for a in doc["attempts"]] == ["completed"]
    assert doc["step"] == uninterrupted["step"] == 188
    assert doc["weights_sha256"] == uninterrupted["weights_sha256"] is not None
    assert doc["store_problem"] is None
    kinds = [e["kind"] for e in json.loads(subprocess.run(spotfit_cmd("logs", doc["id"], "--json"),
                                                          capture_output=True, text=True,
                                                          env=os.environ.copy()).stdout)["events"]]
    assert "store_unreachable" in kinds and "store_back" in kinds
    assert kinds.index("store_unreachable") < kinds.index("store_back")
