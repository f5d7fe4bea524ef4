"""Jobs on hollow attempts (spotfit/hollow/): the test scripts' shapes, and a spec folder with its scenario.

A test whose subject is not TensorFlow (the controller, the ledger, rules, budgets, backends'
failure paths, sweeps' scheduling) runs its jobs on hollow attempts: `SPOTFIT_HOLLOW=1` in the
environment (the `hollow` fixture of tests/conftest.py, or a spec's `env:`) and a `hollow.json`
beside the script, which `write_hollow_spec` writes from the script's shape below. The real
runtime and the hollow one are held to the same contract by tests/attempt/test_contract.py;
docs/testing.md lists which guarantees keep a real-TensorFlow test.

>>> shape_of(DIGITS / "train.py")["steps_per_epoch"], reference(DIGITS / "train.py", ["--epochs", "1"])["step"]
(47, 47)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spotfit.hollow import SCENARIO_FILE
from spotfit.hollow import model as hollow_model
from spotfit.hollow.scenario import Scenario
from tests.support.jobs import DIGITS, write_spec

CONTROLLER_SCRIPTS = Path(__file__).resolve().parents[1] / "controller" / "scripts"
SWEEP_SCRIPTS = Path(__file__).resolve().parents[1] / "sweep" / "scripts"
_KERAS_METRICS = {"accuracy": {"start": 0.5, "end": 0.95}, "val_loss": {"start": 1.2, "end": 0.2},
                  "val_accuracy": {"start": 0.45, "end": 0.93}}

# Each test script's shape as Keras trains it: 1500 digits in batches of 32 are 47 steps an epoch.
SHAPES: dict[str, dict[str, Any]] = {
    "train.py": {"epochs": 3, "steps_per_epoch": 47, "metrics": _KERAS_METRICS,
                 "args": {"--batch-size": None, "--dataset": None}},
    "market_train.py": {"epochs": 4, "steps_per_epoch": 47, "metrics": _KERAS_METRICS},
    "rules_train.py": {"epochs": 5, "steps_per_epoch": 47, "metrics": _KERAS_METRICS,
                       "args": {"--lr": None, "--starve-ms": None}},
    "nan_train.py": {"epochs": 40, "steps_per_epoch": 40, "shuffle": False, "metrics": {},
                     "args": {"--nan-step": "nan_at_step"}},
    "stall_train.py": {"epochs": 1, "steps_per_epoch": 1000, "shuffle": False, "metrics": {},
                       "args": {"--steps": "stall_after", "--wait-for": "stall_until"}},
    "tiny_train.py": {"epochs": 6, "steps_per_epoch": 10, "shuffle": False, "metrics": _KERAS_METRICS,
                      "vary_with_args": True, "args": {"--lr": None, "--units": None}},
}


def shape_of(script: Path) -> dict[str, Any]:
    return dict(SHAPES[Path(script).name])


def write_scenario(folder: Path, script: Path, **overrides: Any) -> Path:
    """`hollow.json` in `folder`: the shape of `script` with `overrides`."""
    path = Path(folder) / SCENARIO_FILE
    path.write_text(json.dumps({**shape_of(script), **overrides}))
    return path


def write_hollow_spec(folder: Path, text: str, script: Path = DIGITS / "train.py", **overrides: Any) -> Path:
    """`write_spec` (a spec in `folder`, the script beside it) with the script's `hollow.json` beside them."""
    spec = write_spec(folder, text, script=script)
    write_scenario(folder, script, **overrides)
    return spec


def reference(script: Path, args: list[str], seed: int = 0, **overrides: Any) -> dict:
    """`step` and `weights_sha256` of the hollow job of `script` run without interruption."""
    scenario = Scenario.from_dict({**shape_of(script), **overrides}, args)
    return hollow_model.reference(scenario, seed)
