"""`python -m tests.support.plain_run SCRIPT SEED OUT_JSON`: a script run as plain `python` would run it,
with the seed and determinism that spotfit's runtime applies under `training: {seed: S,
deterministic: true}` (spotfit/runtime/main.py), and nothing else of spotfit's.

The script runs as `__main__` in the current folder; its output goes to this process's stdout.
OUT_JSON gets `weights_sha256` of the model whose `fit` ran last, by the digest the runtime puts in
a job's result (spotfit/runtime/model_state.py), which also hashes the model that trained last.
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def main(script: str, seed: int, out_json: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
    fitted: list[keras.Model] = []
    original_fit = keras.Model.fit

    def fit(self, *args, **kwargs):
        fitted.append(self)
        return original_fit(self, *args, **kwargs)

    keras.Model.fit = fit  # only records the model: the call is Keras's own
    sys.argv = [script]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    from spotfit.runtime.model_state import weights_sha256

    with open(out_json, "w") as f:
        json.dump({"weights_sha256": weights_sha256(fitted[-1]) if fitted else None}, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
