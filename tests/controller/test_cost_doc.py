"""An ended job's cost document is computed once and kept (controller/cost_doc.py); a live job's never is,
and a document another version of the code computed is computed again."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from spotfit import sdk
from spotfit.controller import cost_doc, hindsight
from spotfit.market.simulator import Job
from spotfit.market.trace import resolve_trace
from spotfit.spec.job import JobSpec
from spotfit.state.states import JobState
from tests.support.statedb import seed_jobs


@pytest.fixture
def state(spotfit_home):
    """Three seeded jobs on the bundled trace: two completed, the middle one running."""
    ids = seed_jobs(spotfit_home / "state.db", 3, running_every=2)
    assert [sdk.db().get_job(j)["state"] for j in ids] == ["completed", "running", "completed"]
    return sdk.db()


@pytest.fixture
def replays(monkeypatch) -> list[bool]:
    """Each hindsight replay the documents make (True when the online policies were replayed too)."""
    calls: list[bool] = []
    real = hindsight.hindsight

    def counted(*args, policies=True, **kwargs):
        calls.append(policies)
        return real(*args, policies=policies, **kwargs)

    monkeypatch.setattr(hindsight, "hindsight", counted)
    return calls


def test_an_ended_jobs_document_is_computed_once_and_a_live_ones_each_time(state, replays):
    first = sdk.cost("seeded-00000")
    assert replays == [True] and first["totals"]["policies"] and first["totals"]["regret"] > 0
    assert sdk.cost("seeded-00000") == first and replays == [True]  # kept: read back, not replayed
    kept = state.kept_cost_docs(cost_doc.version(), 0.0)
    assert set(kept) == {"seeded-00000"} and json.loads(kept["seeded-00000"]) == first
    sdk.cost("seeded-00001")
    sdk.cost("seeded-00001")
    assert replays == [True, True, True] and "seeded-00001" not in state.kept_cost_docs(cost_doc.version(), 0.0)


def test_cost_all_sums_kept_documents_as_it_sums_computed_ones(state, replays):
    computed = sdk.cost_all()  # nothing kept yet: each job's optimum, no policy replayed
    assert replays == [False, False, False]
    assert set(state.kept_cost_docs(cost_doc.version(), 0.0)) == {"seeded-00000", "seeded-00002"}
    again = sdk.cost_all()
    assert replays == [False, False, False, False]  # only the running job is computed again
    # The window's start is the clock's at each call (a second may pass between them): the sums are compared.
    assert abs(datetime.fromisoformat(again.pop("since")) - datetime.fromisoformat(computed.pop("since"))) \
        < timedelta(minutes=5)
    assert again == computed
    assert computed["totals"]["regret"] > 0 and computed["totals"]["optimum_usd"] > 0
    # A document kept without the policies is computed in full for `cost JOB`, and kept so.
    assert sdk.cost("seeded-00002")["totals"]["policies"] and replays[-1] is True


def test_a_document_of_another_code_version_is_computed_again(state, replays):
    first = sdk.cost("seeded-00000")
    state.keep_cost_docs("another-version", {"seeded-00000": json.dumps({**first, "totals": {"policies": {}}})})
    assert sdk.cost("seeded-00000") == first and replays == [True, True]
    assert cost_doc.version() != "another-version" and len(cost_doc.version()) == 16


def test_the_controller_keeps_the_document_of_the_job_that_ended(state, replays):
    state.move_job("seeded-00001", JobState.COMPLETED, "completed")
    cost_doc.keep_ended(state, "seeded-00001")
    cost_doc.keep_ended(state, "seeded-00000")
    assert set(state.kept_cost_docs(cost_doc.version(), 0.0)) == {"seeded-00000", "seeded-00001"}
    assert set(state.kept_spend_entries(cost_doc.version(), 0.0)) == {"seeded-00000", "seeded-00001"}
    assert replays == [True, True]
    assert sdk.cost("seeded-00001") == json.loads(state.kept_cost_docs(cost_doc.version(), 0.0)["seeded-00001"])
    assert replays == [True, True]


def test_a_running_jobs_optimum_is_solved_once_and_again_when_its_window_changes(state, monkeypatch):
    from spotfit.market import simulator  # hindsight imports `simulate` where it replays a window

    solved: list[str] = []
    real = simulator.simulate

    def counted(policy, *args, **kwargs):
        solved.append(type(policy).__name__)
        return real(policy, *args, **kwargs)

    monkeypatch.setattr(simulator, "simulate", counted)
    first = sdk.cost_all()
    # Each window once (two of the seeded jobs share one), each kept.
    assert solved and set(solved) == {"Optimum"} and len(solved) == state.kept_optima_count() < 3
    again = sdk.cost_all()  # as another `spotfit cost --all` would: the memo is read from the state DB
    assert len(solved) == state.kept_optima_count() and again["totals"] == first["totals"]
    # The window's digest: more work done (an attempt's bill entered the ledger) is another window.
    spec = JobSpec.model_validate({"name": "h", "script": "t.py", "market": {"trace": "aws-v100"}})
    path = resolve_trace("aws-v100")
    memo = hindsight.OptimumMemo(version=cost_doc.version())
    job = Job(3600.0, 7200.0, 300.0, 0.0)
    key = memo.key(spec, path, 1e9, job)
    assert key == memo.key(spec, path, 1e9, Job(3600.0, 7200.0, 300.0, 0.0))
    assert key != memo.key(spec, path, 1e9, Job(3900.0, 7200.0, 300.0, 0.0))
    assert key != memo.key(spec, path, 1e9 + 600, job)
    assert key != hindsight.OptimumMemo(version="another version").key(spec, path, 1e9, job)


def test_cost_all_sums_an_ended_jobs_kept_entry_without_reading_the_job_again(state):
    first = sdk.cost_all()
    entries = state.kept_spend_entries(cost_doc.version(), 0.0)
    assert set(entries) == {"seeded-00000", "seeded-00002"}  # the ended jobs' only
    # A kept entry is what is summed: the same figures read back, and one altered in the state DB shows.
    altered = json.loads(entries["seeded-00000"])
    altered["totals"]["spent_usd"] += 100.0
    state.keep_cost_docs(cost_doc.version(), {"seeded-00000": "{}"}, {"seeded-00000": json.dumps(altered)})
    again = sdk.cost_all()
    assert again["totals"]["spent_usd"] == round(first["totals"]["spent_usd"] + 100.0, 6)
    assert [j["id"] for j in again["jobs"]] == [j["id"] for j in first["jobs"]]  # by creation, as before
    # A document kept again without an entry keeps its version's entry; another version's is not read.
    state.keep_cost_docs(cost_doc.version(), {"seeded-00000": "{}"})
    assert json.loads(state.kept_spend_entries(cost_doc.version(), 0.0)["seeded-00000"]) == altered
    state.keep_cost_docs("another-version", {"seeded-00000": "{}"})
    assert sdk.cost_all()["totals"]["spent_usd"] == first["totals"]["spent_usd"]
