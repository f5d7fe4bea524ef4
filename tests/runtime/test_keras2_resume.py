"""tf.keras 2 code runs on Keras 2 and resumes exactly (issue 48, items 1 and 2).

The script (tests/runtime/scripts/keras2_fit.py) is tf.keras 2 code that Keras 3 refuses
(`lr=`, `ModelCheckpoint(period=1)` to `.h5` weights); `training.keras: auto` picks Keras 2
from those lines. One job meets a notice at step 27 (inside the second fit call, mid-epoch, on a
tf.data pipeline that reshuffles each epoch: the first call is skipped and the data drawn again)
and a SIGKILL at step 33 (back to the checkpoint at 27). It must end at 40 steps with the weights
and the History of `python train.py` on Keras 2 (op determinism on in both); like the plain run,
its attempts load nothing of Keras 3.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.jobs import run_inline_job, run_plain_script

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "keras2_fit.py"
SPEC = """name: keras2-fit
script: train.py
market: {trace: null}
checkpoint: {interval: {steps: 25}, keep: 2}
training: {seed: 0, deterministic: true}
"""


def test_tf_keras_2_code_resumes_exactly_through_a_notice_and_a_sigkill(tmp_path):
    expected = run_plain_script(tmp_path / "plain", SCRIPT.read_text(), keras_2=True)
    assert expected["iterations"] == 40 and expected["model"].startswith("tf_keras."), expected
    assert expected["keras_3_loaded"] is False  # nor in the job's attempts: out.json must be the same

    doc = run_inline_job(tmp_path, SPEC, SCRIPT.read_text(), "--preempt-at", "27:5,33:0")
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "killed", "completed"], doc["attempts"]
    assert doc["state"] == "completed" and doc["step"] == 40, doc
    assert json.loads((tmp_path / "job" / "out.json").read_text()) == expected


LEGACY_DROPOUT = """import hashlib, json
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
x = np.random.default_rng(0).random((320, 8), dtype="float32")
y = (x.sum(axis=1) > 4).astype("int32")
model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
                             tf.keras.layers.Dropout(0.5), tf.keras.layers.Dense(2)])
model.compile(optimizer=tf.keras.optimizers.Adam(lr=1e-2),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=3, verbose=0)
weights = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()
json.dump({"weights": weights, "iterations": int(model.optimizer.iterations.numpy())}, open("out.json", "w"))
"""


def test_dropout_on_keras_2s_legacy_random_ops_is_said_not_to_resume_exactly(tmp_path):
    """Keras 2's default RNG keeps its position in TensorFlow's kernels (runtime/keras2/random.py):
    the resumed job ends at the right step, says which layers cannot resume exactly, and (as it
    says) does not end with the plain run's weights."""
    from spotfit import sdk

    expected = run_plain_script(tmp_path / "plain", LEGACY_DROPOUT, keras_2=True)
    doc = run_inline_job(tmp_path, SPEC.replace("keras2-fit", "keras2-legacy-rng"), LEGACY_DROPOUT,
                         "--preempt-at", "15:5")
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "completed"], doc["attempts"]
    got = json.loads((tmp_path / "job" / "out.json").read_text())
    assert doc["step"] == got["iterations"] == expected["iterations"] == 30
    said = [e for e in sdk.logs(doc["id"])["events"] if e["kind"] == "random_not_exact"]
    assert [e["data"]["layers"] for e in said] == [["dropout"]], said
    assert got["weights"] != expected["weights"]
