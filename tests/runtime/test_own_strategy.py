"""A script that builds its own `MirroredStrategy` / `MultiWorkerMirroredStrategy` runs unchanged.

As the TensorFlow guides write it: `strategy = tf.distribute.MirroredStrategy()`, the model
built and compiled in `with strategy.scope():`, the batch scaled by `num_replicas_in_sync`. On
2 logical CPUs and on 2 local worker processes the script gets the attempt's strategy
(runtime/adopt.py), and a preempted run ends with the uninterrupted run's weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotfit import sdk
from tests.support.jobs import run_inline_job

pytestmark = pytest.mark.slow

SCRIPT = '''
import json
import sys

import keras
import numpy as np
import tensorflow as tf

strategy = getattr(tf.distribute, sys.argv[1])()
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype("float32")
y = (x[:, :3].sum(axis=1) > 0).astype("int32")
keras.utils.set_random_seed(3)
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dropout(0.1), keras.layers.Dense(2, activation="softmax")])
    model.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", metrics=["accuracy"])
history = model.fit(x, y, batch_size=16 * strategy.num_replicas_in_sync, epochs=3, shuffle=True, verbose=2)
with open("out.json", "w") as f:
    json.dump({"replicas": strategy.num_replicas_in_sync,
               "is_mirrored": isinstance(strategy, (tf.distribute.MirroredStrategy,
                                                    tf.distribute.MultiWorkerMirroredStrategy)),
               "history": history.history}, f)
'''
SPEC = """name: own-strategy
script: train.py
args: [{cls}]
market: {{trace: null}}
{resources}
checkpoint: {{interval: {{steps: 5}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
"""
TOTAL = 24  # 8 global batches of 32 x 3 epochs; the notice at step 13 is in epoch 2


def _run(tmp_path: Path, cls: str, resources: str, *flags: str) -> tuple[dict, dict, list[dict]]:
    doc = run_inline_job(tmp_path, SPEC.format(cls=cls, resources=resources), SCRIPT, *flags)
    assert doc["state"] == "completed" and doc["step"] == TOTAL, doc
    out = json.loads((tmp_path / "job" / "out.json").read_text())
    return doc, out, sdk.events(doc["id"])


@pytest.mark.parametrize(("cls", "resources"), [
    ("MirroredStrategy", 'env: {SPOTFIT_LOGICAL_CPUS: "2"}'),
    ("MultiWorkerMirroredStrategy", "resources: {workers: 2}"),
])
def test_the_scripts_own_strategy_is_adopted_and_resumes_exactly(tmp_path, cls, resources):
    base, base_out, base_events = _run(tmp_path / "base", cls, resources)
    assert (base_out["replicas"], base_out["is_mirrored"]) == (2, True)
    adopted = [e for e in base_events if e["kind"] == "strategy_adopted"]
    assert [e["data"]["script_class"] for e in adopted] == [cls]
    assert adopted[0]["data"]["replicas"] == 2
    doc, out, _ = _run(tmp_path / "preempted", cls, resources, "--preempt-at", "13:5")
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "completed"]
    assert doc["weights_sha256"] == base["weights_sha256"]
    if cls == "MirroredStrategy":  # one machine: the running metric sums of every replica come back
        assert out["history"] == base_out["history"]
    else:  # several workers: each restores the chief's sums, so the resumed epoch's means differ (docs/resume.md)
        assert {k: len(v) for k, v in out["history"].items()} == {k: len(v) for k, v in base_out["history"].items()}
        assert {k: v[::2] for k, v in out["history"].items()} == {k: v[::2] for k, v in base_out["history"].items()}
