"""`spotfit cost --all`: the sums over the jobs of the state DB (SQLite, and the team's PostgreSQL).

The state DB is filled directly (jobs as a controller leaves them, nothing trains); every sum is
checked against the jobs' own `spotfit cost JOB --json` documents.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from typer.testing import CliRunner

from spotfit.cli import app
from spotfit.state.db import StateDB
from tests.support.postgres import schema_url
from tests.support.statedb import seed_jobs

LABELS = [{"project": "nlp", "owner": "ada"}, {"project": "vision"}, {}]


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request, spotfit_home, tmp_path, monkeypatch) -> str:
    """A state DB with 4 jobs (projects nlp, vision, none, nlp), the last one created 40 days ago."""
    if request.param == "sqlite":
        target = str(spotfit_home / "state.db")
    else:
        server = request.getfixturevalue("postgres")
        target = schema_url(server.url, f"c_{os.getpid()}_{tmp_path.name}".lower().replace("-", "_"))
        monkeypatch.setenv("SPOTFIT_STATE_URL", target)
    ids = seed_jobs(target, 4, running_every=0, labels=LABELS)
    db = StateDB(target)
    db.update_job(ids[-1], created_at=time.time() - 40 * 86_400)
    db.close()
    return target


def _json(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.stderr or result.stdout
    return json.loads(result.stdout)


def test_cost_all_sums_each_jobs_own_ledger_by_project(state):
    doc = _json("cost", "--all", "--by", "project")
    per_job = {j: _json("cost", j)["totals"] for j in ("seeded-00000", "seeded-00001", "seeded-00002")}
    assert [j["id"] for j in doc["jobs"]] == list(per_job)  # the job created 40 days ago is outside 30d
    groups = {g["group"]: g for g in doc["groups"]}
    assert set(groups) == {"nlp", "vision", "(none)"}
    nlp = per_job["seeded-00000"]
    assert groups["nlp"]["spent_usd"] == pytest.approx(nlp["spent_usd"])
    assert groups["nlp"]["savings_usd"] == pytest.approx(nlp["savings_usd"])
    assert groups["nlp"]["waste_usd"] == pytest.approx(nlp["waste_usd"])
    assert groups["nlp"]["regret"] == pytest.approx(nlp["regret"], abs=1e-3)
    totals = doc["totals"]
    for key in ("spent_usd", "on_demand_usd", "waste_usd", "optimum_usd"):
        assert totals[key] == pytest.approx(sum(t[key] for t in per_job.values())), key
    assert totals["jobs"] == 3 and totals["spent_usd"] > 0 and totals["regret"] > 0
    assert sum(d["spent_usd"] for d in doc["days"]) == pytest.approx(totals["spent_usd"])


def test_a_longer_window_and_other_groupings(state):
    doc = _json("cost", "--all", "--since", "6w", "--by", "owner")
    assert {g["group"]: g["jobs"] for g in doc["groups"]} == {"ada": 2, "(none)": 2}
    by_zone = _json("cost", "--all", "--by", "zone")
    assert {g["group"] for g in by_zone["groups"]} == {"us-east-1f", "(none)"}  # the on-demand attempt has no zone
    assert by_zone["totals"]["spent_usd"] == pytest.approx(_json("cost", "--all")["totals"]["spent_usd"])


def test_the_table(state):
    result = CliRunner().invoke(app, ["cost", "--all", "--since", "12h"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("spend by project over the jobs created since")
    total = json.loads(CliRunner().invoke(app, ["cost", "--all", "--since", "12h", "--json"]).stdout)["totals"]
    assert any(line.split("│")[1].strip() == "total" and f"${total['spent_usd']:,.4f}" in line for line in lines
               if "│" in line)


def test_no_jobs_yet(spotfit_home):
    result = CliRunner().invoke(app, ["cost", "--all"])
    assert result.exit_code == 0, result.stderr
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in result.stdout.splitlines() if "│" in line]
    assert rows[-1] == ["total", "0", "$0.0000", "-", "-", "-", "$0.0000", "-"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--all", "--since", "0d"], "`--since`: received '0d'"),
    (["--all", "--since", "30 days"], "expected a window of hours, days or weeks"),
    (["--all", "--since", "4000d"], "at most 3650d"),
    (["--all", "--by", "Project"], "`--by`: received 'Project'"),
    (["some-job", "--all"], "Give a job or --all, not both"),
    (["--by", "owner"], "they need --all"),
])
def test_bad_input_is_one_line(refused, args, fragment):
    assert fragment in refused("cost", *args)
