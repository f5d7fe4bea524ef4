"""The jobs board: filters applied in the state DB's query, the newest first, and a way to all the rest."""

from __future__ import annotations

from fastapi.testclient import TestClient

from spotfit.state.db import StateDB
from spotfit.state.states import JobState
from spotfit.ui.app import create_app
from tests.support.statedb import seed_jobs


def test_the_board_filters_by_state_and_text_and_limits_to_the_newest(tmp_path):
    path = tmp_path / "state.db"
    ids = seed_jobs(path, 30, running_every=10)  # seeded-00009, -00019 and -00029 still run
    client = TestClient(create_app(path, "t"), headers={"Authorization": "token t"})

    def board(**params):
        return client.get("/api/board", params=params).json()

    everything = board()
    assert everything["matching"] == 30 and [r["id"] for r in everything["rows"]] == ids[::-1]
    active = board(state="active")
    assert [r["id"] for r in active["rows"]] == ["seeded-00029", "seeded-00019", "seeded-00009"]
    assert all(r["running_on"] == "spot us-east-1f" and r["cost_usd"] > 0 for r in active["rows"])
    assert board(state="completed")["matching"] == 27
    assert [r["id"] for r in board(q="SEEDED-0001")["rows"]] == [f"seeded-{i:05d}" for i in range(19, 9, -1)]
    newest = board(limit=5)
    assert newest["matching"] == 30 and [r["id"] for r in newest["rows"]] == ids[:-6:-1]

    page = client.get("/", params={"state": "completed", "limit": 5}).text
    assert page.count('<tr data-job="') == 5 and "The newest 5 of 27 matching jobs" in page
    assert 'href="?state=completed&q=&limit=27">show all' in page
    assert 'href="?state=completed&q=&limit=55">show 50 more' not in page  # 27 < 5 + 50: all is the next step
    assert 'href="?state=all&q=&limit=5">show' not in client.get("/").text  # 30 jobs fit the first page
    assert board(q="_")["matching"] == board(q="%")["matching"] == 0  # the text is matched as it is, not a pattern
    assert client.get("/", params={"limit": 0}).status_code == 400


def test_the_first_page_shows_the_newest_50_and_links_the_next_50_and_all(tmp_path):
    path = tmp_path / "state.db"
    ids = seed_jobs(path, 110, running_every=0)
    client = TestClient(create_app(path, "t"), headers={"Authorization": "token t"})
    page = client.get("/").text
    assert "plotly" not in page  # no chart on this page: none of plotly.js's 3 MB to load
    assert page.count('<tr data-job="') == 50 and f'data-job="{ids[-1]}"' in page and "The newest 50 of 110" in page
    assert 'href="?state=all&q=&limit=100">show 50 more' in page and 'href="?state=all&q=&limit=110">show all' in page
    more = client.get("/", params={"limit": 100}).text
    assert more.count('<tr data-job="') == 100 and "show 50 more" not in more and "limit=110\">show all" in more


def test_a_queued_job_is_active_has_its_own_filter_and_renders_as_waiting(tmp_path):
    path = tmp_path / "state.db"
    seed_jobs(path, 3, running_every=0)  # all completed
    StateDB(path).create_job("batch-job-1", "b", spec_json="{}", store_url="memory://b", state=JobState.QUEUED)
    client = TestClient(create_app(path, "t"), headers={"Authorization": "token t"})
    for choice in ("active", "queued"):
        rows = client.get("/api/board", params={"state": choice}).json()["rows"]
        assert [(r["id"], r["state"]) for r in rows] == [("batch-job-1", "queued")], choice
    page = client.get("/", params={"state": "queued"}).text
    assert '<option value="queued" selected>' in page and '<span class="state queued">queued</span>' in page
    assert ".state.queued" in client.get("/static/ui.css").text  # coloured as a job that waits
