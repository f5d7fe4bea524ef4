"""The Sweeps pages and `/api/sweeps`: the leaderboard `spotfit sweep status --json` prints, read-only."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from spotfit.sweep.store import SweepDB
from spotfit.ui.app import create_app
from tests.support.jobs import spotfit_cmd
from tests.support.statedb import seed_jobs

TOKEN = "test-token-sweeps"
SWEEP = "seeded-sweep-a1b2c3"
SPEC = {"job": "spotfit.yaml", "params": {"lr": {"log_uniform": [0.0001, 0.1]}, "units": {"choice": [16, 32]},
                                          "act": {"choice": ["relu", "tanh"]}},
        "objective": {"metric": "val_accuracy", "mode": "max"}, "trials": 4, "parallel": 2}


@pytest.fixture
def sweep(spotfit_home) -> tuple[Path, list[str]]:
    """A sweep of four trials: two completed, one pruned midway (its job still running), one not yet a job."""
    state_db = spotfit_home / "state.db"
    ids = seed_jobs(state_db, 3, running_every=2)  # ids[1] is running at step 60 of 94
    db = SweepDB(spotfit_home / "sweeps.db")
    db.create_sweep(SWEEP, "seeded", json.dumps(SPEC))
    trials = [(0, {"lr": 0.01, "units": 32, "act": "relu"}, "completed", 0.91, ids[0]),
              (1, {"lr": 0.0003, "units": 16, "act": "tanh"}, "pruned", None, ids[1]),
              (2, {"lr": 0.002, "units": 16, "act": "tanh"}, "completed", 0.95, ids[2]),
              (3, {"lr": 0.05, "units": 32, "act": "tanh"}, "creating", None, None)]
    for number, params, state, value, job_id in trials:
        db.add_trial(SWEEP, number, params)
        if job_id:
            db.update_trial(SWEEP, number, state=state, value=value, job_id=job_id)
    del db
    gc.collect()  # the writer's connection closes (and checkpoints its WAL) now, not during a test
    return state_db, ids


def _client(state_db: Path) -> TestClient:
    return TestClient(create_app(state_db, TOKEN), headers={"Authorization": f"token {TOKEN}"})


def _fingerprint(home: Path) -> tuple[str, str]:
    """The sweep DB's data: the file and its WAL (absent = empty). Not `-shm`: a reader of a WAL
    database creates that index (and an empty WAL) where the folder lets it; neither holds rows."""
    wal = home / "sweeps.db-wal"
    return (hashlib.sha256((home / "sweeps.db").read_bytes()).hexdigest(),
            hashlib.sha256(wal.read_bytes() if wal.exists() else b"").hexdigest())


def test_the_sweep_api_returns_what_sweep_status_json_prints(sweep, spotfit_home):
    state_db, _ = sweep
    out = subprocess.run(spotfit_cmd("sweep", "status", SWEEP, "--json"), capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    assert cli["best"]["number"] == 2 and cli["totals"]["saved_by_pruning_usd"] > 0  # the seed is not trivial
    client = _client(state_db)
    assert client.get(f"/api/sweeps/{SWEEP}").json() == cli
    assert client.get("/api/sweeps/seeded").json() == cli  # a name, as the CLI takes it
    assert client.get("/api/sweeps").json() == [cli]


def test_the_sweep_page_has_one_row_per_trial_linking_its_job_and_a_parallel_chart(sweep):
    state_db, ids = sweep
    html = _client(state_db).get(f"/sweeps/{SWEEP}").text
    body = html.split('<table class="trials" id="trials">')[1].split("</table>")[0].split("<tbody>")[1]
    assert body.count("<tr") == 4
    assert re.findall(r'href="/jobs/([^"]+)"', body) == ids
    figures = json.loads(html.split('<script id="figures" type="application/json">')[1].split("</script>")[0])
    parallel = figures["parallel"]["data"][0]
    assert parallel["type"] == "parcoords"
    dims = {d["label"]: d for d in parallel["dimensions"]}
    assert dims["val_accuracy"]["values"] == [0.91, 0.95]  # the two completed trials
    assert dims["act"]["ticktext"] == ["relu", "tanh"] and dims["act"]["values"] == [0, 1]
    assert dims["units"]["values"] == [32, 16]
    assert figures["history"]["data"][1]["y"] == [0.91, 0.95]  # best so far
    assert '<script src="/static/plotly.min.js" defer>' in html and '<div class="chart" id="parallel">' in html


def test_the_sweep_pages_news_carry_a_trials_new_value_while_the_sweep_runs(sweep, spotfit_home):
    state_db, _ = sweep
    client = _client(state_db)
    news = client.get(f"/sweeps/{SWEEP}/live").json()
    assert news["active"] is True and news["figures"]["history"]["data"][0]["y"] == [0.91, 0.95]
    assert 'data-trial="1" data-state="pruned"' in news["html"]["sweep-trials"]
    SweepDB(spotfit_home / "sweeps.db").update_trial(SWEEP, 1, state="completed", value=0.97)
    news = client.get(f"/sweeps/{SWEEP}/live").json()
    assert news["figures"]["history"]["data"][0]["y"] == [0.91, 0.97, 0.95]
    assert 'data-trial="1" data-state="completed"' in news["html"]["sweep-trials"]
    assert "best: trial 1, 0.97" in news["html"]["sweep-summary"]
    SweepDB(spotfit_home / "sweeps.db").update_sweep(SWEEP, state="completed")
    assert client.get(f"/sweeps/{SWEEP}/live").json()["active"] is False  # the page stops asking


def test_the_sweeps_list_links_each_sweep_and_the_pages_never_write(sweep, spotfit_home):
    state_db, _ = sweep
    before = _fingerprint(spotfit_home)
    client = _client(state_db)
    listing = client.get("/sweeps").text
    assert f'href="/sweeps/{SWEEP}"' in listing and "3 / 4" in listing  # completed, pruned, completed; one not started
    for url in ("/sweeps", f"/sweeps/{SWEEP}", f"/sweeps/{SWEEP}/live", "/api/sweeps", f"/api/sweeps/{SWEEP}"):
        assert client.get(url).status_code == 200, url
    assert _fingerprint(spotfit_home) == before


def test_without_sweeps_db_there_are_no_sweeps_yet_and_none_is_created(spotfit_home):
    state_db = spotfit_home / "state.db"
    seed_jobs(state_db, 1)
    client = _client(state_db)
    assert "No sweeps yet" in client.get("/sweeps").text
    assert client.get("/api/sweeps").json() == []
    missing = client.get(f"/api/sweeps/{SWEEP}")
    assert missing.status_code == 404 and "no sweep has run" in missing.json()["error"]
    assert client.get(f"/sweeps/{SWEEP}").status_code == 404
    assert not (spotfit_home / "sweeps.db").exists()


def test_the_sweep_routes_answer_401_without_the_token(sweep):
    state_db, _ = sweep
    client = TestClient(create_app(state_db, TOKEN), follow_redirects=False)
    for url in ("/sweeps", f"/sweeps/{SWEEP}", f"/sweeps/{SWEEP}/live", "/api/sweeps", f"/api/sweeps/{SWEEP}"):
        assert client.get(url).status_code == 401, url
        assert client.get(url, headers={"Authorization": "token wrong"}).status_code == 401, url
