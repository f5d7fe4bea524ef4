"""A spot node reclaimed under a running attempt, then an eviction, end to end on the Kubernetes emulator.

The controller loop and the kubernetes backend are the real ones, and so is everything in the
pod: the emulator's kubelet (tests/support/kube.py) runs the pod entry as a local process,
which runs the real runtime and the Keras script. The node goes away as under the graceful
node shutdown: the pod gets `DisruptionTarget`, the pod entry gets SIGTERM and forwards it, the
runtime saves at the step and exits 75. The controller must call the attempt preempted (not
failed), launch a new Job; the controller's own preemption of that one (an eviction, as for a
replayed market) must do the same; and the job must end with the same weights as one never
interrupted.

The script holds at one step of the first attempt until the test has reclaimed the node, so the
signal lands mid-training whatever the machine's speed (no timing margin).
"""

from __future__ import annotations

import pytest

from spotfit import sdk
from spotfit.backends.kubernetes.manifests import LABEL_ATTEMPT
from spotfit.stores import open_store
from tests.support.jobs import write_spec
from tests.support.kube import FakeCluster
from tests.support.kube_controller import drive
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

SCRIPT = '''
import os
import time
from pathlib import Path

import keras
import numpy as np

GATE = os.environ.get("GATE_DIR")


class Gate(keras.callbacks.Callback):
    """Hold at step 7 of the first run until the test says the node is gone (never with GATE_DIR unset)."""

    def on_train_batch_end(self, batch, logs=None):
        gate = Path(GATE) if GATE else None
        if gate is None or (gate / "released").exists() or int(self.model.optimizer.iterations.numpy()) != 7:
            return
        (gate / "reached").write_text("7")
        deadline = time.monotonic() + 300
        while not (gate / "released").exists() and time.monotonic() < deadline:
            time.sleep(0.02)


rng = np.random.default_rng(0)
x = rng.normal(size=(96, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(x, y, batch_size=16, epochs=3, shuffle=True, callbacks=[Gate()], verbose=0)
'''

SPEC = """
name: kube-preempt
script: train.py
backend: kubernetes
env: {{GATE_DIR: "{gate}"}}
resources: {{accelerator: CPU, spot: true}}
market: {{trace: null}}
checkpoint: {{interval: {{steps: 4}}}}
training: {{seed: 0, deterministic: true}}
kubernetes: {{kubeconfig: "{kubeconfig}", spot: eks, grace_s: 60}}
"""
DEADLINE_S = 240.0


def _job(tmp_path, name: str, cluster: FakeCluster, gate: str, preempt_at: str | None = None) -> str:
    src = tmp_path / "src" / "train.py"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(SCRIPT)
    kubeconfig = cluster.write_kubeconfig(tmp_path / f"{name}.kubeconfig")
    spec = write_spec(tmp_path / name, SPEC.format(gate=gate, kubeconfig=kubeconfig), script=src)
    return sdk.submit(str(spec), preempt_at=preempt_at)


def test_a_reclaimed_node_and_an_eviction_preempt_and_the_job_resumes_exactly(tmp_path):
    gate, folder = tmp_path / "gate", tmp_path / "cluster"
    gate.mkdir()
    folder.mkdir()
    with FakeCluster(folder) as cluster:
        baseline = _job(tmp_path, "baseline", cluster, gate="")
        run = drive(baseline)
        run["thread"].join(DEADLINE_S)
        assert run["outcome"].get("state") == "completed", sdk.status(baseline)

        # Then, at step 12 of the second attempt, the controller's own preemption (what a replayed
        # market or a policy switch sends): an eviction with 5 s of grace.
        job_id = _job(tmp_path, "reclaimed", cluster, gate=str(gate), preempt_at="12:5")
        run = drive(job_id)
        wait_for(lambda: (gate / "reached").exists(), DEADLINE_S, "the first attempt to reach step 7")
        [pod] = [p for p in cluster.pods(**{LABEL_ATTEMPT: "1"})
                 if p["metadata"]["labels"]["spotfit.io/job"] == job_id]
        cluster.reclaim_node(pod["metadata"]["name"])
        (gate / "released").write_text("node gone")
        run["thread"].join(DEADLINE_S)
        assert run["outcome"].get("state") == "completed", sdk.status(job_id)

    doc, base = sdk.status(job_id), sdk.status(baseline)
    first, second, third = doc["attempts"]
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "preempted", "completed"]
    assert first["exit_code"] == 75 and second["exit_code"] == 75
    assert second["start_step"] == first["end_step"] >= 7  # saved at the step: nothing redone
    assert second["end_step"] == third["start_step"] == 12
    assert doc["weights_sha256"] == base["weights_sha256"]
    assert len(base["attempts"]) == 1
    store = open_store(doc["store"])  # the pod entry copied each attempt's output for `spotfit logs`
    assert store.exists("logs/attempt-0001.log") and store.exists("logs/attempt-0002.log")
    assert cluster.objects == {}  # each ended attempt's Job, pods and the rest were deleted
