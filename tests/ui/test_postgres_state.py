"""The dashboard over a team's PostgreSQL state (`SPOTFIT_STATE_URL`): it shows the jobs there, read-only.

A real PostgreSQL server on 127.0.0.1 (the session's `postgres` fixture); each test's tables
live in a schema of their own (`schema_url`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
import uuid

import psycopg
import pytest
from fastapi.testclient import TestClient

from spotfit.state.db import StateDB
from spotfit.state.states import JobState
from spotfit.sweep.store import SweepDB
from spotfit.ui.app import create_app
from spotfit.ui.readonly import ReadOnlyStateDB, ReadOnlySweepDB
from tests.support.jobs import spotfit_cmd
from tests.support.postgres import schema_url
from tests.support.statedb import seed_jobs
from tests.support.wait import wait_for

TOKEN = "test-token-postgres"


@pytest.fixture
def state_url(postgres) -> str:
    return schema_url(postgres.url, f"ui_{uuid.uuid4().hex[:12]}")


def _rows(url: str) -> list[tuple]:
    """Every job, attempt and event row, to compare before and after."""
    with psycopg.connect(url) as conn:
        return [row for table in ("jobs", "attempts", "events")
                for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()]


def test_a_write_through_the_dashboards_postgres_connection_is_refused(state_url):
    [job_id] = seed_jobs(state_url, 1)
    before = _rows(state_url)
    ro = ReadOnlyStateDB(state_url)
    try:
        for write in (lambda: ro.move_job(job_id, JobState.FAILED, "set by the test"),
                      lambda: ro.add_event(job_id, "x", "a write"),
                      lambda: ro.create_job("new", "new", "{}", "memory://n")):
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction, match="read-only transaction"):
                write()
    finally:
        ro.close()
    assert _rows(state_url) == before


def test_the_jobs_in_postgres_show_on_every_page_and_serving_them_writes_nothing(state_url):
    ids = seed_jobs(state_url, 3, running_every=2)
    before = _rows(state_url)
    client = TestClient(create_app(state_url, TOKEN), headers={"Authorization": f"token {TOKEN}"})
    assert [j["id"] for j in client.get("/api/jobs").json()] == ids[::-1]
    board = client.get("/api/board?q=SEEDED-0000").json()  # the filter matches ids in any case
    assert [r["id"] for r in board["rows"]] == ids[::-1] and board["matching"] == 3
    assert client.get("/api/board?state=running").json()["matching"] == 1
    page = client.get("/").text
    assert all(f'data-job="{job_id}"' in page for job_id in ids)
    assert "postgresql://postgres@127.0.0.1" in page and "(read-only)" in page
    assert client.get(f"/api/jobs/{ids[0]}").json()["id"] == ids[0]
    assert client.get(f"/api/jobs/{ids[0]}/cost").json()["totals"]["spent_usd"] > 0
    assert client.get(f"/jobs/{ids[1]}").status_code == 200
    assert _rows(state_url) == before


def test_an_empty_postgres_state_shows_no_jobs_and_gets_no_tables(state_url):
    client = TestClient(create_app(state_url, TOKEN), headers={"Authorization": f"token {TOKEN}"})
    assert client.get("/api/jobs").json() == []
    assert "No jobs" in client.get("/").text
    assert client.get("/jobs/nope").status_code == 404
    with psycopg.connect(state_url) as conn:
        assert conn.execute("SELECT to_regclass('jobs')").fetchone() == (None,)


def test_spotfit_ui_serves_the_jobs_of_spotfit_state_url_behind_its_token(state_url, spotfit_home):
    db = StateDB(state_url)
    db.create_job("team-job-1", "team", spec_json="{}", store_url="memory://team")
    db.close()
    seed_jobs(spotfit_home / "state.db", 1)  # the home's own state, which the dashboard must not show
    proc = subprocess.Popen(spotfit_cmd("ui", "--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, stdin=subprocess.DEVNULL,
                            env={**os.environ, "SPOTFIT_STATE_URL": state_url, "SPOTFIT_UI_TOKEN": TOKEN})
    lines: list[str] = []
    assert proc.stdout is not None
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    try:
        line = wait_for(lambda: next((x for x in lines if "spotfit ui: open" in x), None), 60,
                        "`spotfit ui` to print its URL")
        base = line.split("open ", 1)[1].strip().split("?")[0]
        request = urllib.request.Request(base + "api/jobs", headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            assert [j["id"] for j in json.load(response)] == ["team-job-1"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "api/jobs", timeout=60)
        assert refused.value.code in (401, 403)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert [x for x in lines if TOKEN in x] == [line]  # printed once, in its URL; never in the access log


def test_the_sweeps_in_postgres_show_read_only(state_url):
    """Where the state is on PostgreSQL the sweeps are too (`sweep.store.sweeps_target`): the
    dashboard lists them from there, over a session that refuses writes."""
    [job_id] = seed_jobs(state_url, 1)
    client = TestClient(create_app(state_url, TOKEN), headers={"Authorization": f"token {TOKEN}"})
    assert client.get("/api/sweeps").json() == []  # no sweep recorded yet: no tables made either
    assert client.get("/sweeps").status_code == 200
    writer = SweepDB(state_url)
    writer.create_sweep("pg-sweep-a1b2c3", "pg", json.dumps({"objective": {"metric": "val_accuracy", "mode": "max"}}))
    writer.add_trial("pg-sweep-a1b2c3", 0, {"lr": 0.01})
    writer.update_trial("pg-sweep-a1b2c3", 0, state="completed", value=0.9, job_id=job_id)
    writer.close()
    [doc] = client.get("/api/sweeps").json()
    assert doc["id"] == "pg-sweep-a1b2c3" and doc["trials"][0]["value"] == 0.9
    assert "pg-sweep-a1b2c3" in client.get("/sweeps").text
    ro = ReadOnlySweepDB.open(state_url)
    assert ro is not None
    try:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction, match="read-only transaction"):
            ro.update_sweep("pg-sweep-a1b2c3", state="failed")
    finally:
        ro.close()
