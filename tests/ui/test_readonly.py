"""The dashboard only reads the state DB: its connection refuses writes, and serving changes nothing."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient

from spotfit.state.db import StateDB
from spotfit.state.states import JobState
from spotfit.ui.app import create_app
from spotfit.ui.readonly import ReadOnlyStateDB
from tests.support.statedb import seed_jobs


def _dump(path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_a_write_through_the_dashboards_connection_fails_and_changes_nothing(tmp_path):
    path = tmp_path / "state.db"
    [job_id] = seed_jobs(path, 1)
    before = _dump(path)
    ro = ReadOnlyStateDB(path)
    for write in (lambda: ro.move_job(job_id, JobState.FAILED, "set by the test"),
                  lambda: ro.add_event(job_id, "x", "a write"),
                  lambda: ro.create_job("new", "new", "{}", "memory://n")):
        with pytest.raises(sqlite3.OperationalError, match="readonly database"):
            write()
    ro.close()
    assert _dump(path) == before


def test_serving_every_page_leaves_the_state_db_as_it_was(tmp_path):
    path = tmp_path / "state.db"
    ids = seed_jobs(path, 3, running_every=2)
    before = _dump(path)
    client = TestClient(create_app(path, "t"), headers={"Authorization": "token t"})
    for url in ("/", "/rows", f"/jobs/{ids[0]}", f"/jobs/{ids[1]}/live", "/api/jobs", "/api/board",
                f"/api/jobs/{ids[0]}", f"/api/jobs/{ids[0]}/cost", f"/api/jobs/{ids[1]}/logs"):
        assert client.get(url).status_code == 200, url
    assert _dump(path) == before


def test_a_dashboard_without_a_state_db_shows_no_jobs_and_creates_none(tmp_path):
    path = tmp_path / "state.db"
    client = TestClient(create_app(path, "t"), headers={"Authorization": "token t"})
    assert client.get("/api/jobs").json() == []
    assert "No jobs" in client.get("/").text
    assert client.get("/jobs/nope").status_code == 404
    assert not path.exists()


def test_a_newer_schema_is_refused_with_its_version(tmp_path):
    path = tmp_path / "state.db"
    StateDB(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(Exception, match="schema version 99"):
        ReadOnlyStateDB(path)
