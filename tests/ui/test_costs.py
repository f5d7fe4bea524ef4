"""The dashboard's Costs page and `/api/costs`: the numbers `spotfit cost --all --json` prints."""

from __future__ import annotations

import html
import json
import re
import time

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from spotfit.cli import app as cli
from spotfit.state.db import StateDB
from spotfit.ui.app import create_app
from tests.support.statedb import seed_jobs

TOKEN = "t"
COMPARED = ("by", "window", "groups", "totals", "days", "jobs")  # `since` is the clock's at each call


@pytest.fixture
def client(spotfit_home) -> TestClient:
    path = spotfit_home / "state.db"
    ids = seed_jobs(path, 5, running_every=0, labels=[{"project": "nlp"}, {"project": "vision"}, {}])
    db = StateDB(path)
    db.update_attempt(ids[1], 3, started_at=time.time() - 86_400)  # a day before: two days on the chart
    db.close()
    return TestClient(create_app(path, TOKEN), headers={"Authorization": f"token {TOKEN}"})


def _cli(*args: str) -> dict:
    result = CliRunner().invoke(cli, ["cost", "--all", *args, "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("by", ["project", "zone"])
def test_api_costs_is_the_cli_document(client, by):
    api = client.get(f"/api/costs?since=2w&by={by}").json()
    cli_doc = _cli("--since", "2w", "--by", by)
    assert {k: api[k] for k in COMPARED} == {k: cli_doc[k] for k in COMPARED}
    assert api["totals"]["jobs"] == 5 and api["totals"]["spent_usd"] > 0


def test_the_costs_page_shows_the_cli_numbers(client):
    page = client.get("/costs?by=project")
    assert page.status_code == 200
    figures = json.loads(html.unescape(re.search(r'<script id="figures" type="application/json">(.*?)</script>',
                                                 page.text, re.S).group(1)))
    cli_doc = _cli("--by", "project")
    bars = {trace["name"]: trace for trace in figures["spend"]["data"]}
    assert list(bars) == [g["group"] for g in cli_doc["groups"]]
    for g in cli_doc["groups"]:  # each group's stacked bars add up to its spend
        assert sum(bars[g["group"]]["y"]) == pytest.approx(g["spent_usd"])
    assert len(bars["vision"]["x"]) == 2  # the attempt launched a day earlier is on its own day
    assert figures["spend"]["layout"]["barmode"] == "stack"
    cells = [re.sub(r"<[^>]+>", " ", row).split() for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page.text, re.S)]
    total = cli_doc["totals"]
    assert ["total", str(total["jobs"]), f"${total['spent_usd']:,.2f}"] == cells[-1][:3]


def test_bad_parameters_and_an_empty_state(client, spotfit_home):
    answer = client.get("/api/costs?since=forever")
    assert answer.status_code == 400 and "`--since`" in answer.json()["error"]
    assert client.get("/costs?by=Bad").status_code == 400
    (spotfit_home / "state.db").unlink()
    empty = client.get("/api/costs").json()
    assert empty["groups"] == [] and empty["totals"]["jobs"] == 0
    assert not (spotfit_home / "state.db").exists()  # the dashboard creates no state DB
