"""`spotfit budget list/set/rm`: budgets over many jobs in `$SPOTFIT_HOME/config.yaml`, and their checks."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from spotfit.cli import app
from spotfit.host.settings import load_settings
from tests.support.statedb import seed_jobs


def _json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["budget", *args, "--json"])
    assert result.exit_code == 0, result.stderr or result.stdout
    return json.loads(result.stdout)


def test_set_list_and_rm(spotfit_home):
    seed_jobs(spotfit_home / "state.db", 3, running_every=0, labels=[{"project": "nlp"}, {"project": "cv"}])
    doc = _json("set", "nlp", "--usd", "20", "--label", "project=nlp", "--at-80-percent", "none")
    [nlp] = doc["budgets"]
    assert (nlp["name"], nlp["labels"], nlp["usd"], nlp["period"], nlp["at_80_percent"], nlp["at_100_percent"]) == (
        "nlp", {"project": "nlp"}, 20.0, "month", "none", "pause")
    per_job = 4.6622  # each seeded job's three attempts (tests/support/statedb.py), launched now
    assert nlp["spent_usd"] == pytest.approx(2 * per_job) and nlp["percent"] == round(100 * 2 * per_job / 20, 1)
    doc = _json("set", "all", "--usd", "5", "--period", "day")
    assert [(b["name"], b["spent_usd"]) for b in doc["budgets"]] == [("nlp", pytest.approx(2 * per_job)),
                                                                      ("all", pytest.approx(3 * per_job))]
    assert load_settings().budgets[1].period == "day"  # what the controller reads
    _json("set", "nlp", "--usd", "30", "--label", "project=nlp")  # replaces the budget of that name
    assert [(b.name, b.usd) for b in load_settings().budgets] == [("all", 5.0), ("nlp", 30.0)]
    assert [b["name"] for b in _json("rm", "all")["budgets"]] == ["nlp"]
    table = CliRunner().invoke(app, ["budget", "list"]).stdout
    assert "project=nlp" in table and "$30.0000" in table


@pytest.mark.parametrize(("args", "fragment"), [
    (["set", "x", "--usd", "-5"], "Invalid `--usd`: received -5.0, expected greater than 0"),
    (["set", "x", "--usd", "5", "--period", "year"], "Invalid `--period`: received 'year'"),
    (["set", "x", "--usd", "5", "--label", "Project=nlp"], "('Project' is not one)"),
    (["set", "x", "--usd", "5", "--label", "project"], "Invalid `--label`: received 'project', expected KEY=VALUE"),
    (["set", "x y", "--usd", "5"], "Invalid `NAME`: received 'x y'"),
    (["set", "x", "--usd", "5", "--at-100-percent", "stop"], "Invalid `--at-100-percent`: received 'stop'"),
    (["rm", "nope"], "No budget 'nope'"),
])
def test_bad_input_is_one_line_and_changes_nothing(refused, spotfit_home, args, fragment):
    spotfit_home.mkdir(mode=0o700)
    (spotfit_home / "config.yaml").write_text("budgets: [{name: kept, usd: 1}]\n")
    assert fragment in refused("budget", *args)
    assert (spotfit_home / "config.yaml").read_text() == "budgets: [{name: kept, usd: 1}]\n"


def test_a_broken_settings_file_is_one_line_for_every_budget_verb_and_for_run(refused, spotfit_home, tmp_path):
    spotfit_home.mkdir(mode=0o700)
    (spotfit_home / "config.yaml").write_text("budgets: [{name: x, usd: 10, perod: day}]\n")
    expected = f"error: Unknown field `budgets[0].perod` in {spotfit_home / 'config.yaml'}: did you mean `period`?"
    assert refused("budget", "list") == expected
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "job.yaml").write_text("name: j\nscript: train.py\nmarket: {trace: null}\n")
    assert refused("run", str(tmp_path / "job.yaml")) == expected  # nothing recorded (refused checks it)


def test_run_refuses_a_sink_secret_that_is_not_set(refused, tmp_path, monkeypatch):
    monkeypatch.delenv("OPS_HOOK", raising=False)
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "job.yaml").write_text("name: j\nscript: train.py\nmarket: {trace: null}\n"
                                       "notify: {sinks: [{webhook: {secret: OPS_HOOK}, events: [failed]}]}\n")
    assert refused("run", str(tmp_path / "job.yaml")) == (
        "error: Secret `OPS_HOOK` (spec `notify.sinks[0].webhook`) is not set in this shell: expected the URL in "
        "the environment.")
