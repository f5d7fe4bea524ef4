"""What spotfit patches is invisible to Keras's own introspection (issue 48, item 0).

The runtime replaces `compile` (to learn the script's `jit_compile`), `fit` and the optimizer's
`apply`. Keras tells a custom `compile` by `model.__class__.compile != Trainer.compile`, and then
`load_model` returns the model uncompiled (a held-out example failed at its next `fit`:
`'Functional' object has no attribute 'optimizer'`). The script below fits, saves a `.keras`
file, loads it and fits again, and writes what Keras sees; under spotfit it must see what
`python train.py` sees, and end with the same weights.
"""

from __future__ import annotations

import json

import pytest

from tests.support.jobs import run_inline_job, run_plain_script

pytestmark = pytest.mark.slow

SCRIPT = '''
import hashlib
import json
import warnings

import keras
import numpy as np
from keras.src.optimizers.base_optimizer import BaseOptimizer
from keras.src.trainers.trainer import Trainer

keras.utils.set_random_seed(0)
x = np.random.default_rng(0).random((64, 4), dtype="float32")
y = x.sum(axis=1, keepdims=True)
inputs = keras.Input((4,))
model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Dense(8, activation="relu")(inputs)))
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, epochs=2, batch_size=16, verbose=0)
model.save("own.keras")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = keras.models.load_model("own.keras")
seen = {
    "compiled": bool(model.compiled),
    "has_optimizer": getattr(model, "optimizer", None) is not None,
    "custom_compile_warning": [str(w.message)[:80] for w in caught if "compile()" in str(w.message)],
    "compile_is_trainers": type(model).compile is Trainer.compile,
    "names": [(f.__module__, f.__qualname__) for f in (Trainer.compile, keras.Model.fit, BaseOptimizer.apply)],
}
model.fit(x, y, epochs=2, batch_size=16, verbose=0)  # needs the compiled model load_model returned
seen["weights"] = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()
with open("out.json", "w") as f:
    json.dump(seen, f)
'''
SPEC = """name: reload
script: train.py
market: {trace: null}
training: {seed: 0}
"""


def test_a_model_loaded_inside_an_attempt_comes_back_compiled_as_in_a_plain_run(tmp_path):
    expected = run_plain_script(tmp_path / "plain", SCRIPT, deterministic=False)
    assert expected["compiled"] and expected["has_optimizer"] and not expected["custom_compile_warning"], expected

    doc = run_inline_job(tmp_path, SPEC, SCRIPT)
    assert doc["state"] == "completed", doc
    seen = json.loads((tmp_path / "job" / "out.json").read_text())  # the attempt runs in the spec's folder
    assert seen == expected
