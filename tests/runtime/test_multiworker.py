"""Two real worker processes on 127.0.0.1 (MultiWorkerMirroredStrategy under unmodified Keras `fit`),
on Keras 3 and on Keras 2 (the same script in tf.keras 2, `training.keras: 2`).

The local backend starts one process per worker with `TF_CONFIG`; a SIGTERM to one worker (not
the chief) makes both stop after the same step, the chief save, and the job resume with both
workers to the same weights as an uninterrupted two-worker run. To know the step the signal
lands at, worker 1 stands still after step 30 (its callback runs before spotfit's) until the
test has signalled it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.job_report import report_also
from tests.support.jobs import spotfit_cmd, spotfit_home_at, write_spec
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

SCRIPT = '''
import json, os, time
from pathlib import Path
import keras
import numpy as np

MARKS = os.environ.get("MW_MARKS")


class HoldWorker1(keras.callbacks.Callback):
    """With MW_MARKS set: worker 1 writes its pid after step 30 and holds until `released`."""
    step = 0
    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if not MARKS or self.step != 30 or json.loads(os.environ["TF_CONFIG"])["task"]["index"] != 1:
            return
        marks = Path(MARKS)
        if (marks / "released").exists():  # a resumed attempt: held once already
            return
        (marks / "pid.tmp").write_text(str(os.getpid()))
        (marks / "pid.tmp").replace(marks / "holding")
        deadline = time.monotonic() + 300
        while not (marks / "released").exists():
            if time.monotonic() > deadline:
                raise SystemExit("timed out after 300s waiting for the test to release worker 1")
            time.sleep(0.02)


rng = np.random.default_rng(0)
x = rng.standard_normal((512, 8)).astype("float32")
y = (x[:, :3].sum(axis=1) > 0).astype("int32")
keras.utils.set_random_seed(3)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dropout(0.1), keras.layers.Dense(2, activation="softmax")])
model.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=6, shuffle=True, validation_data=(x[:64], y[:64]), verbose=2,
          callbacks=[HoldWorker1()])
print("final", model.evaluate(x, y, verbose=0))
'''
SPEC = """
name: two-workers
script: train.py
resources: {workers: 2}
market: {trace: null}
checkpoint: {interval: {steps: 20}}
training: {seed: 0, deterministic: true, keras: KERAS}
"""
# Keras 2's Dropout draws from a tf.random.Generator only when asked (docs/resume.md#keras-2).
KERAS_2 = ("import tensorflow as tf\nkeras = tf.keras\n"
           "tf.keras.backend.experimental.enable_tf_random_generator()\n")
TOTAL = 96  # 16 global batches x 6 epochs


def _start(folder: Path, keras: str) -> subprocess.Popen:
    script = folder / "src" / "train.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SCRIPT if keras == "3" else SCRIPT.replace("import keras\n", KERAS_2))
    spec = write_spec(folder, SPEC.replace("KERAS", keras), script=script)
    return subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=os.environ.copy())


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["state"] == "completed" and doc["step"] == TOTAL, doc
    return doc


def _job_folder(home: Path) -> Path:
    found = sorted((home / "store" / "jobs").glob("*"))
    return found[-1] if found else None


def _events(job: Path, kind: str) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in sorted((job / "events").glob("*.json"))]
    return [d for d in docs if d["kind"] == kind]


@pytest.fixture(scope="module", params=["3", "2"], ids=["keras3", "keras2"])
def baseline(tmp_path_factory, request) -> tuple[dict, Path, str]:
    home = tmp_path_factory.mktemp("mw-home")
    report_also(request, home)
    with spotfit_home_at(home):
        doc = _finish(_start(tmp_path_factory.mktemp("mw-base"), request.param))
        return doc, _job_folder(home), request.param


def test_two_workers_train_in_sync_to_the_same_weights(baseline):
    doc, job, _ = baseline
    strategy = _events(job, "strategy")
    assert strategy and strategy[0]["data"]["replicas"] == 2 and strategy[0]["data"]["workers"] == 2
    worker1 = json.loads((job / "workers" / "1" / "result.json").read_text())
    assert worker1["weights_sha256"] == doc["weights_sha256"]
    assert [a["state"] for a in doc["attempts"]] == ["completed"]
    # Only the chief writes checkpoints: every checkpoint event is the chief's.
    assert _events(job, "checkpoint") and not list((job / "workers" / "1").glob("checkpoints/*"))


def test_sigterm_to_one_worker_stops_both_and_resumes_exactly(tmp_path, spotfit_home, baseline, monkeypatch):
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("MW_MARKS", str(marks))
    proc = _start(tmp_path / "job", baseline[2])
    try:
        wait_for(lambda: (marks / "holding").exists() or proc.poll() is not None, 300,
                 "worker 1 to reach step 30 and hold")
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        os.kill(int((marks / "holding").read_text()), signal.SIGTERM)  # worker 1 only, not the chief
    finally:
        (marks / "released").touch()  # the notice is pending: let worker 1 go on to its next step
    notice_step = 30
    doc = _finish(proc)
    job = _job_folder(spotfit_home)
    first, second = doc["attempts"]
    assert first["state"] == "preempted" and second["state"] == "completed"
    # Both workers stopped after the same step: the one after the step the notice came at.
    assert first["end_step"] == notice_step + 1 and second["start_step"] == first["end_step"]
    saved = [e for e in _events(job, "checkpoint") if e["attempt"] == 1]
    assert saved[-1]["data"]["step"] == first["end_step"] and "worker 1" in saved[-1]["data"]["reason"]
    assert doc["weights_sha256"] == baseline[0]["weights_sha256"]
    worker1 = json.loads((job / "workers" / "1" / "result.json").read_text())
    assert worker1["weights_sha256"] == doc["weights_sha256"]
    assert [e["data"]["workers"] for e in _events(job, "strategy")] == [2, 2]  # resumed with all workers
