"""A script that fails the same way twice (same error line, same step) is not launched a third time.

The controller's side runs against a stand-in backend whose attempts report a runtime `failed`
event and exit 1 (no TensorFlow); the whole path (the runtime's report from a real Keras
script, the CLI, the job's status) runs once through `spotfit run`.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from spotfit import sdk
from spotfit.backends.base import AttemptStatus
from spotfit.controller.loop import Controller
from spotfit.spec.job import JobSpec
from spotfit.stores import open_store
from tests.support.jobs import spotfit_cmd


class _Handle(str):
    def to_json(self) -> str:
        return str(self)


class _FailsAt:
    """A stand-in backend: attempt n's runtime reports `errors(n)` = (error line, step) and exits 1."""

    name = "stand-in"
    runs_here = False

    def __init__(self, store_url: str, errors):
        self.store = open_store(store_url)
        self.errors = errors
        self.launches = 0

    def launch(self, request):
        self.launches += 1
        line, step = self.errors(request.attempt)
        event = {"attempt": request.attempt, "ts": 0.0, "kind": "failed", "message": line,
                 "data": {"error": line.split(":")[0], "error_line": line, "step": step}}
        self.store.write_bytes(f"events/{request.attempt:04d}-000001.json", json.dumps(event).encode())
        return _Handle(f"h{request.attempt}")

    def load_handle(self, text: str) -> _Handle:
        return _Handle(text)

    def status(self, handle) -> AttemptStatus:
        return AttemptStatus(running=False, exit_code=1)

    def stop(self, handle, grace_s: float = 10.0) -> None:
        pass

    def find(self, request):
        return None


def _run(tmp_path, monkeypatch, errors) -> tuple[str, _FailsAt]:
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    spec = JobSpec.model_validate({"name": "rf", "script": "train.py", "max_failures": 3, "failure_backoff_s": 0,
                                   "market": {"trace": None, "zones": []}})
    url = f"file://{tmp_path}/store"
    sdk.db().create_job("rf-1", "rf", spec.model_dump_json(), url)
    backend = _FailsAt(url, errors)
    return Controller(sdk.db(), "rf-1", backend=backend, poll_s=0.0).run(), backend


def test_the_same_error_at_the_same_step_twice_fails_the_job_without_a_third_launch(tmp_path, monkeypatch):
    state, backend = _run(tmp_path, monkeypatch, lambda n: ("ValueError: loss exploded", 40))
    assert state == "failed" and backend.launches == 2
    doc = sdk.status("rf-1")
    assert [(a["state"], a["failure"]) for a in doc["attempts"]] == [("failed", "script")] * 2
    assert "attempts 1 and 2, at step 40: ValueError: loss exploded" in doc["message"], doc["message"]
    assert [e["kind"] for e in sdk.events("rf-1")].count("repeated_failure") == 1


@pytest.mark.parametrize("errors", [
    lambda n: (f"ValueError: try {n}", 40),  # another error each time
    lambda n: ("ValueError: loss exploded", 40 + n),  # at another step each time
    lambda n: ("StoreError: connection refused", 40),  # the store's, not the script's: retry may mend it
], ids=["other-error", "other-step", "store"])
def test_failures_that_differ_are_retried_up_to_max_failures(tmp_path, monkeypatch, errors):
    state, backend = _run(tmp_path, monkeypatch, errors)
    assert state == "failed" and backend.launches == 4  # 1 try + max_failures 3
    assert "more than max_failures=3" in sdk.status("rf-1")["message"]


SCRIPT = '''
import keras
import numpy as np

class Diverges(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            raise FloatingPointError("the loss diverged in epoch 2")

rng = np.random.default_rng(0)
x = rng.standard_normal((128, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy")
model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[Diverges()])
'''


@pytest.mark.slow
def test_a_real_script_that_fails_the_same_way_twice_stops_with_its_error(tmp_path, job_spec):
    src = tmp_path / "src" / "train.py"
    src.parent.mkdir()
    src.write_text(SCRIPT)
    spec = job_spec("name: diverges\nscript: train.py\nmax_failures: 3\nfailure_backoff_s: 0.1\n"
                    "market: {trace: null}\n", script=src)
    out = subprocess.run(spotfit_cmd("run", str(spec), "--json"), capture_output=True, text=True, timeout=600,
                         stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 1, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "failed" and [a["state"] for a in doc["attempts"]] == ["failed", "failed"]
    assert "in attempts 1 and 2, at step 4: FloatingPointError: the loss diverged in epoch 2" in doc["message"]
    text = subprocess.run(spotfit_cmd("status", doc["id"]), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=os.environ.copy()).stdout
    assert "FloatingPointError: the loss diverged in epoch 2" in " ".join(text.split())
