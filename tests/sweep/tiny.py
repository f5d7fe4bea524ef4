"""The tiny sweep the sweep tests run: a seeded Keras MLP (scripts/tiny_train.py) and its sweep file.

`job_folder(folder, name, args, env)` writes the base job (the script beside its spec) and
returns the spec's path (`env={"TINY_PACE_S": "0"}`: a re-run alone, its steps not paced for a
pruner); `job_folder(..., hollow={...})` makes it a job of hollow attempts (spotfit/hollow/):
`SPOTFIT_HOLLOW=1` in its `env` and the script's shape in `hollow.json` (tests/support/hollow_jobs.py),
with the given fields. `SWEEP` is the 12-trial ASHA sweep file, which tests trim with `str.replace`
(the kill-and-resume sweep to 6).
`batch_specs(folder, go)` writes the batch tests' three jobs, on hollow attempts, whose scenario
waits for the file `go` before its first step (as the script beside it waits before its one
epoch): the test, not the machine's speed, decides when they end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spotfit.hollow import HOLLOW_ENV, SCENARIO_FILE
from tests.support.hollow_jobs import write_scenario
from tests.support.jobs import place_script

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


# The batch jobs' script; their attempts are hollow and run `gated_scenario` instead, its same shape.
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


def gated_scenario(go: Path) -> dict[str, Any]:
    """GATED_SCRIPT as a hollow scenario: no step until the file `go` exists, then one epoch of 2 steps."""
    return {"epochs": 1, "steps_per_epoch": 2, "metrics": {}, "stall_after": 0, "stall_until": str(go)}


def batch_specs(folder: Path, go: Path) -> list[str]:
    """Jobs a, b and c (hollow attempts), each in its own folder under `folder`, gated on the file `go`;
    their specs' paths."""
    specs = []
    for name in ("a", "b", "c"):
        (folder / name).mkdir(parents=True)
        (folder / name / "train.py").write_text(GATED_SCRIPT)
        (folder / name / SCENARIO_FILE).write_text(json.dumps(gated_scenario(go)))
        spec = folder / name / "spotfit.yaml"
        spec.write_text(f"name: {name}\nscript: train.py\nmarket: {{trace: null}}\n"
                        f"env: {{BATCH_GO: '{go}', {HOLLOW_ENV}: '1'}}\n")
        specs.append(str(spec))
    return specs


def job_folder(folder: Path, name: str, args: list[str], env: dict[str, str] | None = None,
               hollow: dict[str, Any] | None = None) -> Path:
    """The tiny job's spec (named `name`, the script's `args` and `env`) in `folder`, the script beside it;
    with `hollow` (fields over the script's shape), a job of hollow attempts."""
    place_script(folder / SCRIPT.name, SCRIPT.read_text())
    if hollow is not None:
        write_scenario(folder, SCRIPT, **hollow)
        env = {**(env or {}), HOLLOW_ENV: "1"}
    path = folder / "spotfit.yaml"
    path.write_text(SPEC.format(name=name, args=json.dumps(args), env=json.dumps(env or {})))
    return path
