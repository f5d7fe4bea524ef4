"""The tiny sweep the sweep tests run: a seeded Keras MLP (scripts/tiny_train.py) and its sweep file.

`job_folder(folder, name, args)` writes the base job (the script beside its spec) and returns
the spec's path; `SWEEP` is the 12-trial ASHA sweep file, which tests trim with `str.replace`.
"""

from __future__ import annotations

import json
from pathlib import Path

SCRIPT = Path(__file__).parent / "scripts" / "tiny_train.py"
SPEC = """name: {name}
script: tiny_train.py
args: {args}
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


def job_folder(folder: Path, name: str, args: list[str]) -> Path:
    """The tiny job's spec (named `name`, the script's `args`) in `folder`, the script beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SCRIPT.name).write_text(SCRIPT.read_text())
    path = folder / "spotfit.yaml"
    path.write_text(SPEC.format(name=name, args=json.dumps(args)))
    return path
