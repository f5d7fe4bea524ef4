"""A job's page comes at once, with the ledger; the hindsight figures (the replay of every policy) come apart."""

from __future__ import annotations

from fastapi.testclient import TestClient

from spotfit import sdk
from spotfit.ui.app import create_app
from tests.support.statedb import seed_jobs


def test_the_page_comes_without_the_policies_replay_and_the_hindsight_route_brings_them(spotfit_home):
    path = spotfit_home / "state.db"
    [job_id] = seed_jobs(path, 1)
    client = TestClient(create_app(path, "t"), headers={"Authorization": "token t"})
    cost = sdk.cost(job_id)
    assert cost["totals"]["policies"] and cost["totals"]["optimum_usd"]  # the seeded job has hindsight figures

    first = client.get(f"/jobs/{job_id}").text
    assert 'data-pending="true"' in first and "computing…" in first and 'data-policy="' not in first
    assert f'<dd id="spent">${cost["totals"]["spent_usd"]:,.4f}</dd>' in first  # the ledger is there already
    assert client.get(f"/jobs/{job_id}/live").json()["pending"] is True

    html = client.get(f"/jobs/{job_id}/hindsight").json()["html"]
    assert [f'data-policy="{name}"' in html["ledger"] for name in cost["totals"]["policies"]] == \
        [True] * len(cost["totals"]["policies"])
    assert f'<dd id="optimum">${cost["totals"]["optimum_usd"]:,.4f}</dd>' in html["summary"]

    again = client.get(f"/jobs/{job_id}").text  # computed once: the page now comes with them
    assert 'data-pending="false"' in again and "computing…" not in again
    assert client.get(f"/jobs/{job_id}/live").json()["pending"] is False
