"""Which Keras a script runs on is decided before a launch, from lines that really need Keras 2 (issue 48).

`spotfit validate` and `spotfit run` read the script's syntax tree (spotfit/script/keras2.py): with
`training.keras: auto` a script with lines that only `tf.keras` 2 runs goes to Keras 2, and the
choice is said in one line; with `keras: 3` those lines are named in a warning. Each snippet below
is run under the Keras 3 spotfit pins and under Keras 2 (`tf-keras`, `TF_USE_LEGACY_KERAS=1`), so
both claims ("fails under Keras 3", "runs on Keras 2") are checked, not assumed; Keras 3 spellings
of the same things are not named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spotfit.script.keras2 import reasons
from tests.support.jobs import spotfit_cmd

KERAS_2 = {  # snippet -> the words its reason carries
    "keras.callbacks.ModelCheckpoint('m.weights.h5', save_weights_only=True, period=1)": "period",
    "keras.callbacks.ModelCheckpoint('m-{epoch:02d}.h5', save_weights_only=True)": "weights.h5",
    "model.save_weights('w.h5')": "save_weights",
    "keras.optimizers.Adam(lr=0.01)": "lr=",
    "keras.optimizers.legacy.SGD(0.1)": "optimizers.legacy",
    "model.fit_generator(iter([(x, y)]), steps_per_epoch=1)": "fit_generator",
}
KERAS_3 = [
    "keras.callbacks.ModelCheckpoint('m.weights.h5', save_weights_only=True, save_freq='epoch')",
    "keras.callbacks.ModelCheckpoint('m.keras')",
    "model.save_weights('w.weights.h5')",
    "keras.optimizers.Adam(learning_rate=0.01)",
    "model.fit(x, y, verbose=0)",
    "df.apply(f); opt = make_optimizer(lr=0.1)",  # not Keras: an `lr` of the script's own
]
_SETUP = ("import keras, numpy as np\nx = np.zeros((4, 2), 'float32'); y = np.zeros((4, 1), 'float32')\n"
          "model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]); model.compile('sgd', 'mse')\n")


@pytest.mark.parametrize("snippet", list(KERAS_2))
def test_each_keras_2_construct_is_named(snippet):
    [reason] = reasons(snippet)
    assert reason.line == 1 and KERAS_2[snippet] in reason.what + reason.instead, reason


def test_keras_3_spellings_are_not_named():
    assert [reasons(s) for s in KERAS_3] == [[] for _ in KERAS_3]


def test_what_is_named_fails_under_keras_3_and_its_keras_3_spelling_runs(tmp_path):
    program = _SETUP + "import json\nout = {}\n"
    for i, snippet in enumerate([*KERAS_2, *KERAS_3[:5]]):
        program += (f"try:\n    {snippet}\n    out[{i}] = None\n"
                    f"except Exception as e:\n    out[{i}] = type(e).__name__\n")
    program += "print(json.dumps(out))\n"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.splitlines()[-1])
    raised = [out[str(i)] for i in range(len(KERAS_2))]
    assert all(raised), dict(zip(KERAS_2, raised, strict=True))
    assert [out[str(len(KERAS_2) + i)] for i in range(5)] == [None] * 5


def test_what_is_named_runs_on_keras_2(tmp_path):
    program = _SETUP.replace("import keras,", "import tensorflow as tf; keras = tf.keras; import") + \
        "import json\nout = {}\n"
    program = program.replace("keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])",
                              "keras.Sequential([keras.layers.Dense(1, input_shape=(2,))])")
    for i, snippet in enumerate(KERAS_2):
        program += (f"try:\n    {snippet}\n    out[{i}] = None\n"
                    f"except Exception as e:\n    out[{i}] = type(e).__name__\n")
    program += "print(json.dumps({**out, 'keras': type(model).__module__}))\n"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_USE_LEGACY_KERAS": "1"},
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out.pop("keras").startswith("tf_keras."), "the snippets ran on Keras 2's classes"
    assert out == {str(i): None for i in range(len(KERAS_2))}, dict(zip(KERAS_2, out.values(), strict=True))


_OLD_SCRIPT = (
    "import tensorflow as tf\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "model.compile(optimizer=tf.keras.optimizers.Adam(lr=0.01), loss='mse')\n"
    "cb = tf.keras.callbacks.ModelCheckpoint('./ckpt/model-{epoch:02d}.h5', save_weights_only=True, period=1)\n"
    "model.fit(x, y, epochs=3, callbacks=[cb])\n")


def _validate(tmp_path, spec: str):
    (tmp_path / "train.py").write_text(_OLD_SCRIPT)
    (tmp_path / "spotfit.yaml").write_text(spec)
    return subprocess.run(spotfit_cmd("validate", str(tmp_path / "spotfit.yaml"), "--json"), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, env=os.environ.copy())


def test_auto_picks_keras_2_from_the_lines_and_says_why(tmp_path):
    done = _validate(tmp_path, "name: k2\nscript: train.py\n")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    doc = json.loads(done.stdout)
    assert doc["keras"]["version"] == "2" and doc["keras2_code"] is None
    why = doc["keras"]["why"]
    assert "line 3: `Adam(lr=...)`" in why and "line 4: `ModelCheckpoint(period=...)`" in why, why
    plain = subprocess.run(spotfit_cmd("validate", str(tmp_path / "spotfit.yaml")), capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL, env=os.environ.copy())
    keras_line = [line for line in plain.stdout.splitlines() if line.startswith("keras: ")]
    assert keras_line == ["keras: train.py runs on Keras 2 (tf.keras from tf-keras, TF_USE_LEGACY_KERAS=1): "
                          f"{doc['keras']['why']}; `training.keras: 3` once it is ported"], plain.stdout


def test_keras_3_by_the_spec_names_the_lines_that_will_fail(tmp_path):
    done = _validate(tmp_path, "name: k2\nscript: train.py\ntraining: {keras: 3}\n")
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("warning: train.py has tf.keras 2 code") and "line 3: `Adam(lr=...)`" in line, line
    assert "line 4: `ModelCheckpoint(period=...)`" in line and "set `training.keras: 2`" in line
    doc = json.loads(done.stdout)
    assert doc["keras2_code"] == line.removeprefix("warning: ") and doc["keras"]["version"] == "3"


@pytest.mark.parametrize(("setting", "named"), [
    ("training: {mixed_precision: mixed_float16}", "`training.mixed_precision`"),
    ("training: {xla: 'on'}", "`training.xla`"),
    ("export: {formats: [savedmodel]}", "`export`"),
], ids=["mixed_precision", "xla", "export"])
def test_a_setting_keras_2_cannot_honour_is_refused_in_one_line(tmp_path, setting, named):
    done = _validate(tmp_path, f"name: k2\nscript: train.py\ntraining: {{keras: 2}}\n{setting}\n"
                     if not setting.startswith("training") else
                     f"name: k2\nscript: train.py\n{setting[:-1]}, keras: 2}}\n")
    assert done.returncode == 2, done.stdout
    first, hint = done.stderr.splitlines()
    assert first.startswith(f"error: Invalid {named} for Keras 2") and "train.py runs on Keras 2" in first, first
    assert hint.startswith("hint: ")
