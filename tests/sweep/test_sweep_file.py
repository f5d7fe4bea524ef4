"""Bad sweep input gets one clear line and exit 2, before anything is recorded."""

from __future__ import annotations

import subprocess

import pytest

from spotfit.sweep.spec import load_sweep
from tests.support.jobs import spotfit_cmd

BASE = {"params": "{lr: {log_uniform: [0.0001, 0.1]}}", "trials": "4", "objective": "{metric: val_accuracy}"}


def _sweep_file(tmp_path, **fields: str):
    (tmp_path / "train.py").write_text("print('never run')\n")
    (tmp_path / "spotfit.yaml").write_text("name: tiny\nscript: train.py\n")
    lines = ["job: spotfit.yaml", *(f"{k}: {v}" for k, v in {**BASE, **fields}.items())]
    path = tmp_path / "sweep.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(("fields", "expected"), [
    ({"params": "{lr: {log_unifrom: [0.0001, 0.1]}}"},
     "Invalid `params.lr` in {path}: received {{'log_unifrom': [0.0001, 0.1]}}, unknown distribution `log_unifrom` "
     "(did you mean `log_uniform`?): expected one of log_uniform, uniform, int_uniform, choice."),
    ({"params": "{units: {choice: []}}"},
     "Invalid `params.units` in {path}: received {{'choice': []}}, expected at least one value in `choice`, "
     "received an empty list."),
    ({"trials": "0"},
     "Invalid `trials` in {path}: received 0, expected: input should be greater than or equal to 1."),
    ({"pruner": "ashaa"},
     "Invalid `pruner` in {path}: received 'ashaa', expected one of 'none', 'median' or 'asha'."),
    ({"samplr": "tpe"}, "Unknown field `samplr` in {path}: did you mean `sampler`?"),
], ids=["unknown-distribution", "empty-choice", "trials-below-1", "unknown-pruner", "misspelt-key"])
def test_bad_sweep_file_is_one_line_and_exit_2(tmp_path, spotfit_home, fields, expected):
    path = _sweep_file(tmp_path, **fields)
    out = subprocess.run(spotfit_cmd("sweep", str(path)), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    error, hint = out.stderr.splitlines()
    assert error == "error: " + expected.format(path=path)
    assert hint.startswith("hint: ") and "docs/sweeps.md" in hint
    assert not (spotfit_home / "sweeps.db").exists() and not (spotfit_home / "optuna.db").exists()


def test_grid_takes_only_choices(tmp_path):
    path = _sweep_file(tmp_path, sampler="grid")
    with pytest.raises(Exception, match="expected only `choice` parameters with `sampler: grid`; `lr` is a range"):
        load_sweep(path)


def test_defaults_and_params(tmp_path):
    spec = load_sweep(_sweep_file(tmp_path, params="{lr: {uniform: [0.1, 0.5]}, units: {choice: [8, 16]}, "
                                                    "layers: {int_uniform: [1, 3]}}"))
    assert (spec.sampler, spec.pruner, spec.pass_as, spec.parallel, spec.objective.mode) == (
        "tpe", "none", "args", 1, "max")
    assert {n: (p.kind, p.values) for n, p in spec.params.items()} == {
        "lr": ("uniform", (0.1, 0.5)), "units": ("choice", (8, 16)), "layers": ("int_uniform", (1, 3))}
    assert spec.job_path == tmp_path / "spotfit.yaml"


def test_a_grid_sweep_draws_each_point_once_and_stops_at_the_grid_size(tmp_path, spotfit_home):
    from spotfit.sweep import study

    spec = load_sweep(_sweep_file(tmp_path, sampler="grid", trials="10",
                                  params="{units: {choice: [8, 16]}, act: {choice: [relu, tanh]}}"))
    assert study.grid_size(spec) == 4
    study.create("grid-sweep", spec)
    drawn = [study.ask(study.load("grid-sweep", spec), spec)[1] for _ in range(4)]
    assert sorted((p["units"], p["act"]) for p in drawn) == [(8, "relu"), (8, "tanh"), (16, "relu"), (16, "tanh")]


def test_a_resumed_sweep_draws_what_an_uninterrupted_one_does(tmp_path, spotfit_home):
    from spotfit.sweep import study

    spec = load_sweep(_sweep_file(tmp_path, params="{lr: {log_uniform: [0.001, 0.5]}, units: {choice: [8, 16]}}"))
    for name in ("once", "twice"):
        study.create(name, spec)
    once = study.load("once", spec)
    straight = [study.ask(once, spec)[1] for _ in range(4)]
    resumed = [study.ask(study.load("twice", spec), spec)[1] for _ in range(4)]  # a fresh process each time
    assert resumed == straight and len({p["lr"] for p in straight}) == 4
