"""A team budget holds on the replay: 1, 2 and 5 jobs at once under $3, on SQLite and on PostgreSQL.

Each job is the digits example (`make demo`'s: the replayed aws-v100 market at 600 trace seconds
a second; about $6.87 when it runs to the end) with the label `project=demo`, started by its own
`spotfit run` process at the same moment, all under one team budget of $3 (`config.yaml`) that
pauses at 100 %. Before the budgets' allowances one job paused at $4.06 (its controller looked
every 10 wall seconds, 6,000 trace seconds apart) and two jobs on the default SQLite state spent
$6.91 together (neither counted the other's running attempt).

Every job must end paused by the team budget, and all together must have spent the budget, within
a cent, and no more than the budget plus one billing minimum (60 s at the zone's on-demand price)
for each job: the attempts that were running when it was reached. On SQLite the jobs share
`$SPOTFIT_HOME/state.db`; on PostgreSQL a schema of the session's server (`SPOTFIT_STATE_URL`).

The attempts are hollow (spotfit/hollow/): the example's 940 steps in next to no time, each
standing at its last step until it is asked to stop or has a notice (and then stops there), so no
attempt ends by itself before its controller has looked, whatever the machine's speed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime

import pytest
import yaml

from spotfit import sdk
from spotfit.market.replay import MarketReplay
from spotfit.market.trace import load_trace, resolve_trace
from tests.support.hollow_jobs import write_scenario
from tests.support.jobs import DIGITS, spotfit_cmd
from tests.support.postgres import schema_url

pytestmark = pytest.mark.slow
BUDGET_USD = 3.0
LAST_STEP = 20 * 47  # the example's `--epochs 20` of ceil(1500 / 32) steps


def _on_demand_minimum_usd(spec: dict) -> float:
    """One billing minimum (60 s) on-demand in the example's zone: the dearest an attempt's first minute bills."""
    market = spec["market"]
    replay = MarketReplay(load_trace(resolve_trace(market["trace"])), market["zones"], 600.0,
                          datetime.fromisoformat(market["start"]))
    return replay.cost_usd("on_demand", market["zones"][0], replay.origin_s, replay.origin_s)[1]


def _spec(folder) -> str:
    shutil.copytree(DIGITS, folder)
    write_scenario(folder, DIGITS / "train.py", wait_for_stop_at=LAST_STEP)
    spec = yaml.safe_load((folder / "spotfit.yaml").read_text())
    spec["name"] = folder.name  # jobs of one name refuse each other while one is live
    spec["labels"] = {"project": "demo"}
    (folder / "spotfit.yaml").write_text(yaml.safe_dump(spec))
    return str(folder / "spotfit.yaml")


@pytest.mark.usefixtures("hollow")
@pytest.mark.parametrize("jobs", [1, 2, 5])
@pytest.mark.parametrize("state", ["sqlite", "postgresql"])
def test_jobs_at_once_under_one_team_budget_spend_it_and_no_more(tmp_path, spotfit_home, monkeypatch, request,
                                                                  state, jobs):
    if state == "postgresql":
        monkeypatch.setenv("SPOTFIT_STATE_URL", schema_url(request.getfixturevalue("postgres").url,
                                                           f"t_hold_{jobs}"))
    spotfit_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (spotfit_home / "config.yaml").write_text(yaml.safe_dump(
        {"budgets": [{"name": "demo", "labels": {"project": "demo"}, "usd": BUDGET_USD, "at_80_percent": "none"}]}))
    specs = [_spec(tmp_path / f"job-{i}") for i in range(jobs)]
    runs = [subprocess.Popen(spotfit_cmd("run", spec, "--json"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=os.environ.copy())
            for spec in specs]
    errors = [run.communicate(timeout=600)[1] for run in runs]
    docs = [sdk.status(job["id"]) for job in sdk.list_jobs(limit=100)]
    assert len(docs) == jobs, errors
    assert [d["state"] for d in docs] == ["paused"] * jobs, [(d["state"], d["message"]) for d in docs]
    assert all(d["paused"]["rule"] == "team_budget" for d in docs), [d["paused"] for d in docs]
    minimum_usd = _on_demand_minimum_usd(yaml.safe_load((tmp_path / "job-0" / "spotfit.yaml").read_text()))
    spent = sum(d["cost_usd"] for d in docs)
    assert BUDGET_USD - 0.01 <= spent <= BUDGET_USD + jobs * minimum_usd, [
        (d["id"], [(a["state"], a["cost_usd"]) for a in d["attempts"]]) for d in docs]
