"""The script's own choices win: dtype policy, `jit_compile`, history and metrics as `python train.py` has them.

By default spotfit applies nothing that changes numerics (auto only measures on a copy and
offers); an explicit spec setting wins with a `spec_overrides` event; a policy spotfit applied
that breaks the script before its first step falls back in place.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotfit import sdk
from tests.support.jobs import run_inline_job

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts"
SPEC = """name: {name}
script: train.py
args: {args}
market: {{trace: null}}
checkpoint: {{interval: {{steps: 5}}, keep: 2}}
env: {{SPOTFIT_TRIAL_BUDGET: "1000"}}
training: {{seed: 0{training}}}
"""


def _spotfit(tmp_path: Path, *flags: str, args: str = "[]", training: str = "",
             script: str | None = None) -> tuple[dict, dict, list[dict]]:
    text = script or (SCRIPTS / "plain_history.py").read_text()
    doc = run_inline_job(tmp_path, SPEC.format(name="choices", args=args, training=training), text, *flags)
    assert doc["state"] == "completed", doc
    out_path = tmp_path / "job" / "out.json"
    out = json.loads(out_path.read_text()) if out_path.exists() else {}
    return doc, out, sdk.events(doc["id"])


def _plain(tmp_path: Path, *args: str) -> dict:
    """`python train.py ARGS` in a folder of its own, as a user runs it."""
    folder = tmp_path / "plain"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text((SCRIPTS / "plain_history.py").read_text())
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "train.py", *args], cwd=folder, check=True, capture_output=True, timeout=300,
                   env=env, stdin=subprocess.DEVNULL)
    return json.loads((folder / "out.json").read_text())


def _kinds(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["kind"] == kind]


def test_default_runs_as_written_with_the_plain_history_after_a_mid_epoch_resume(tmp_path):
    # 9 steps per epoch: the notice at step 23 is mid-way through the last epoch, so its
    # accuracy and loss come from running sums restored from the checkpoint.
    plain = _plain(tmp_path)
    doc, out, events = _spotfit(tmp_path / "spotfit", "--preempt-at", "23:5", training=", deterministic: true")
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "completed"]
    assert (out["policy"], out["jit"], out["output_dtype"]) == ("float32", False, "float32")
    assert plain["policy"] == "float32"
    assert sorted(out["history"]) == sorted(plain["history"])  # learning_rate included
    assert "learning_rate" in out["history"]
    assert {k: len(v) for k, v in out["history"].items()} == {k: len(v) for k, v in plain["history"].items()}
    for key, values in plain["history"].items():
        assert out["history"][key] == pytest.approx(values, rel=1e-6, abs=1e-7), key
    assert not _kinds(events, "metrics_not_restored")
    # auto measured on a copy and reported what it would offer, without applying it.
    offers = _kinds(events, "offer")
    assert offers and all("would take" in e["message"] or "no speed-up offered" in e["message"] for e in offers)
    # `spotfit status` carries the same offers (each with the line it prints).
    measured = [e["message"] for e in offers if "would take" in e["message"] and not e["data"]["reused"]]
    assert [o["message"] for o in doc["offers"]] == measured  # attempt 2 reported them again, without measuring


def test_the_scripts_own_policy_and_jit_compile_run(tmp_path):
    # Without `deterministic` (Keras itself turns jit_compile off under op determinism).
    _, out, events = _spotfit(tmp_path, args='["--policy", "mixed_bfloat16", "--jit"]')
    assert (out["policy"], out["jit"]) == ("mixed_bfloat16", True)
    assert out["output_dtype"] == "bfloat16"  # the script's model as it built it
    assert not _kinds(events, "spec_overrides")


def test_an_explicit_spec_setting_wins_and_says_so(tmp_path):
    _, out, events = _spotfit(tmp_path, args='["--policy", "mixed_bfloat16", "--jit"]',
                              training=", mixed_precision: 'off', xla: 'off'")
    assert (out["policy"], out["jit"]) == ("float32", False)
    overrides = {e["data"]["setting"]: e["message"] for e in _kinds(events, "spec_overrides")}
    assert overrides == {
        "mixed_precision": "the script sets dtype policy mixed_bfloat16; training.mixed_precision: off wins",
        "xla": "the script compiles with jit_compile=True; training.xla: off wins",
    }


MIXED_DTYPES = '''
import keras
import numpy as np
import tensorflow as tf


class Concat(keras.Model):
    """Joins a layer's output with a float32 constant, as a GAN's train_step joins fakes and reals."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(4)
        self.head = keras.layers.Dense(1)

    def call(self, x):
        h = self.hidden(x)
        return self.head(tf.concat([h, tf.ones((tf.shape(h)[0], 1), tf.float32)], axis=-1))


rng = np.random.default_rng(0)
x = rng.normal(size=(64, 3)).astype("float32")
y = x.sum(axis=1, keepdims=True)
keras.utils.set_random_seed(1)
model = Concat()
model.compile("sgd", "mse")
model.fit(x, y, batch_size=16, epochs=2, verbose=2)
with open("out.json", "w") as f:
    f.write('{"policy": "%s"}' % keras.mixed_precision.global_policy().name)
'''


def test_a_policy_that_breaks_the_script_falls_back_in_place(tmp_path):
    doc, out, events = _spotfit(tmp_path, training=", mixed_precision: mixed_bfloat16", script=MIXED_DTYPES)
    assert [a["state"] for a in doc["attempts"]] == ["completed"]  # no failed, billed retry
    assert doc["step"] == 8 and out["policy"] == "float32"
    [fallback] = _kinds(events, "speedup_fallback")
    assert fallback["data"]["applied"] == "mixed_bfloat16" and "bfloat16" in fallback["message"]
