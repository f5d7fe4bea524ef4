"""The tiny sweep the sweep tests run: a seeded Keras MLP (scripts/tiny_train.py) and its sweep file.

`job_folder(folder, name, args, env)` writes the base job (the script beside its spec) and
returns the spec's path (`env={"TINY_PACE_S": "0"}`: a re-run alone, its steps not paced for a
pruner); `SWEEP` is the 12-trial ASHA sweep file, which tests trim with `str.replace`
(the kill-and-resume sweep to 6).
`batch_specs(folder, go)` writes the batch tests' three jobs, whose script waits for the file
`go` before its one epoch: the test, not the machine's speed, decides when they end.
"""

from __future__ import annotations

import json
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "tiny_train.py"
SPEC = """name: {name}
script: tiny_train.py
args: {args}
env: {env}
market: {{trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 10}}
checkpoint: {{interval: {{steps: 5}}}}
training: {{seed: 0, deterministic: true, tensorboard: false, mixed_precision: "off", xla: "off"}}
export: {{formats: [keras]}}
"""
SWEEP = """job: spotfit.yaml
params:
  lr: {log_uniform: [0.003, 0.5]}
  units: {choice: [8, 16, 32]}
objective: {metric: val_accuracy, mode: max}
trials: 12
parallel: 2
sampler: tpe
pruner: asha
budget_usd: 20
"""


GATED_SCRIPT = '''
import os
import time
from pathlib import Path

import keras
import numpy as np

go = Path(os.environ["BATCH_GO"])
deadline = time.monotonic() + 300
while not go.exists():
    if time.monotonic() > deadline:
        raise SystemExit(f"the test never created {go}")
    time.sleep(0.05)
x = np.random.default_rng(0).standard_normal((32, 4)).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
model.compile("sgd", "sparse_categorical_crossentropy")
model.fit(x, (x[:, 0] > 0).astype("int32"), batch_size=16, epochs=1, verbose=2)
'''


def batch_specs(folder: Path, go: Path) -> list[str]:
    """Jobs a, b and c, each in its own folder under `folder`, gated on the file `go`; their specs' paths."""
    specs = []
    for name in ("a", "b", "c"):
        (folder / name).mkdir(parents=True)
        (folder / name / "train.py").write_text(GATED_SCRIPT)
        spec = folder / name / "spotfit.yaml"
        spec.write_text(f"name: {name}\nscript: train.py\nmarket: {{trace: null}}\nenv: {{BATCH_GO: '{go}'}}\n")
        specs.append(str(spec))
    return specs


def job_folder(folder: Path, name: str, args: list[str], env: dict[str, str] | None = None) -> Path:
    """The tiny job's spec (named `name`, the script's `args` and `env`) in `folder`, the script beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SCRIPT.name).write_text(SCRIPT.read_text())
    path = folder / "spotfit.yaml"
    path.write_text(SPEC.format(name=name, args=json.dumps(args), env=json.dumps(env or {})))
    return path
