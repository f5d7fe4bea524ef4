"""The state's Prometheus metrics (`spotfit/controller/metrics.py`): figures read from a state DB filled directly,
served by `spotfit controller --metrics-port` and by the dashboard, scraped over HTTP on 127.0.0.1."""

from __future__ import annotations

import time
import urllib.request

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from spotfit.controller import metrics
from spotfit.state.db import StateDB
from spotfit.ui.app import create_app
from tests.support.statedb import seed_jobs

LABELS = [{"project": "nlp", "owner": "ada"}, {"project": "cv"}]


def samples(text: str) -> dict[tuple, float]:
    """{(sample name, sorted label items): value} of a Prometheus text exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def state(spotfit_home) -> str:
    """4 seeded jobs (2 completed, 2 running; projects nlp/ada, cv, nlp/ada, cv) and three rule verdicts."""
    path = str(spotfit_home / "state.db")
    seed_jobs(path, 4, running_every=2, labels=LABELS)
    db = StateDB(path)
    db.add_event("seeded-00000", "rule", "budget: ... -> stop", rule="budget", index=0, action="stop")
    db.add_event("seeded-00002", "budget_limit", "budget: ... -> pause", rule="budget", index=0, action="pause")
    db.add_event("seeded-00001", "team_budget", "team_budget: ... -> notify", rule="team_budget", action="notify")
    db.close()
    return path


def _spent(path: str, job_ids: list[str]) -> float:
    db = StateDB(path)
    try:
        return sum(a["cost_usd"] or 0.0 for j in job_ids for a in db.attempts(j))
    finally:
        db.close()


def test_the_figures_are_the_state_dbs(state):
    db = StateDB(state)
    started = time.time() - 100.0
    db.update_attempt("seeded-00001", 3, started_at=started)  # running since 100 s, steps 48 -> 60
    db.close()
    before = time.time()
    got = samples(metrics.exposition(lambda: StateDB(state)).decode())
    after = time.time()
    assert got[("spotfit_jobs", (("state", "completed"),))] == 2
    assert got[("spotfit_jobs", (("state", "running"),))] == 2
    assert got[("spotfit_jobs", (("state", "failed"),))] == 0
    local = ("backend", "local")
    assert got[("spotfit_attempts_total", (local, ("market", "spot"), ("outcome", "preempted")))] == 4
    assert got[("spotfit_attempts_total", (local, ("market", "on_demand"), ("outcome", "stopped")))] == 4
    assert got[("spotfit_attempts_total", (local, ("market", "spot"), ("outcome", "completed")))] == 2
    assert got[("spotfit_attempts_live", (local, ("market", "spot")))] == 2
    assert got[("spotfit_preemptions_total", (local, ("zone", "us-east-1f")))] == 4
    nlp = got[("spotfit_spend_usd_total", (local, ("owner", "ada"), ("project", "nlp")))]
    assert nlp == pytest.approx(_spent(state, ["seeded-00000", "seeded-00002"]))
    cv = got[("spotfit_spend_usd_total", (local, ("owner", ""), ("project", "cv")))]
    assert cv == pytest.approx(_spent(state, ["seeded-00001", "seeded-00003"]))
    assert got[("spotfit_rule_firings_total", (("action", "stop"), ("rule", "budget")))] == 1
    assert got[("spotfit_rule_firings_total", (("action", "pause"), ("rule", "budget")))] == 1
    assert got[("spotfit_rule_firings_total", (("action", "notify"), ("rule", "team_budget")))] == 1
    rate = got[("spotfit_steps_per_second", (("job", "seeded-00001"), ("name", "seeded-1")))]
    assert 12 / (after - started) <= rate <= 12 / (before - started)


def test_the_controller_and_the_dashboard_serve_the_same_metrics(state):
    server = metrics.serve(state, "127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=30) as answer:
            served = samples(answer.read().decode())
    finally:
        server.shutdown()
        server.server_close()
    client = TestClient(create_app(state, "t"), headers={"Authorization": "Bearer t"})
    page = client.get("/metrics")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    rate = "spotfit_steps_per_second"  # read at each scrape's own time
    assert {k: v for k, v in samples(page.text).items() if k[0] != rate} == {
        k: v for k, v in served.items() if k[0] != rate}
    assert ("spotfit_jobs", (("state", "running"),)) in served


def test_a_home_without_a_state_serves_zero_jobs(spotfit_home):
    got = samples(TestClient(create_app(spotfit_home / "state.db", "t"), headers={"Authorization": "Bearer t"})
                  .get("/metrics").text)
    assert got[("spotfit_jobs", (("state", "pending"),))] == 0
    assert not (spotfit_home / "state.db").exists()

