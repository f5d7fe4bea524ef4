"""Keras 2 code is named before a launch, and each construct named really fails under Keras 3 (issue 48).

`spotfit validate` and `spotfit run` read the script's syntax tree (spotfit/keras2.py) and warn
with the lines that only `tf.keras` 2 runs. Each snippet below is run under the Keras 3 spotfit
pins, so the warning's claim ("fails under Keras 3") is checked, not assumed; Keras 3 spellings of
the same things are not named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spotfit.keras2 import reasons
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


def test_validate_and_run_name_the_lines_before_any_launch(tmp_path):
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n"
        "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "model.compile(optimizer=tf.keras.optimizers.Adam(lr=0.01), loss='mse')\n"
        "cb = tf.keras.callbacks.ModelCheckpoint('./ckpt/model-{epoch:02d}.h5', save_weights_only=True, period=1)\n"
        "model.fit(x, y, epochs=3, callbacks=[cb])\n")
    (tmp_path / "spotfit.yaml").write_text("name: k2\nscript: train.py\n")
    done = subprocess.run(spotfit_cmd("validate", str(tmp_path / "spotfit.yaml"), "--json"), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("warning: train.py has tf.keras 2 code") and "line 3: `Adam(lr=...)`" in line, line
    assert "line 4: `ModelCheckpoint(period=...)`" in line and "spotfit does not run Keras 2" in line
    assert json.loads(done.stdout)["keras2_code"] == line.removeprefix("warning: ")
