"""`python -m tests.support.plain_run SCRIPT SEED OUT_JSON`: a script run as plain `python` would run it,
with the seed and determinism that spotfit's runtime applies under `training: {seed: S,
deterministic: true}` (spotfit/runtime/main.py), and nothing else of spotfit's.

The script runs as `__main__` in the current folder; its output goes to this process's stdout.
OUT_JSON gets `weights_sha256` of the model whose `fit` ran last, by the digest the runtime puts in
a job's result (spotfit/runtime/model_state.py), which also hashes the model that trained last.
With `TF_USE_LEGACY_KERAS=1` in the environment the script's `tf.keras` is Keras 2 (`tf_keras`),
as for a job on Keras 2 (`training.keras: 2`), and its `fit` is the one recorded; a script with
its own loop and no `fit` is hashed by the model its optimizer's last `apply_gradients` trained.
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def main(script: str, seed: int, out_json: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
        import tf_keras as keras
    else:
        import keras  # type: ignore[no-redef]

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    fitted: list[keras.Model] = []
    original_fit = keras.Model.fit

    def fit(self, *args, **kwargs):
        fitted.append(self)
        return original_fit(self, *args, **kwargs)

    keras.Model.fit = fit  # only records the model: the call is Keras's own
    applied: list = []  # the variables a script's own loop applied last (Keras 2: its `apply_gradients`)
    if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
        for cls in (keras.optimizers.Optimizer, keras.optimizers.legacy.Optimizer):
            def apply_gradients(self, grads_and_vars, *args, _original=cls.apply_gradients, **kwargs):
                pairs = list(grads_and_vars)
                applied[:] = [v for g, v in pairs if g is not None]
                return _original(self, pairs, *args, **kwargs)

            cls.apply_gradients = apply_gradients
    sys.argv = [script]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    script_globals = runpy.run_path(script, run_name="__main__")  # noqa: F841 — keeps its model alive for find_model
    from spotfit.runtime.apply_hook import find_model
    from spotfit.runtime.model_state import weights_sha256

    model = fitted[-1] if fitted else (find_model(applied, keras.Model) if applied else None)
    with open(out_json, "w") as f:
        json.dump({"weights_sha256": weights_sha256(model) if model is not None else None}, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
