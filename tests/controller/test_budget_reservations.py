"""Team budgets in the shared PostgreSQL, and two controllers that must not both launch past one.

A real PostgreSQL server (the session's embedded one, tests/support/postgres.py) holds the state
and the `team_budgets` / `budget_reservations` tables. Two controllers, each with its own
connection in its own thread, decide their launch at the same moment (a barrier): each launch
reserves its expected spend in the transaction that checks the budget, so the second sees the
first's reservation and pauses. While an attempt runs, its controller's check counts the other
jobs' reservations too, and grows its own to the attempt's cost so far. Nothing trains: the jobs
run on a stand-in backend.
"""

from __future__ import annotations

import threading

import pytest

from spotfit import sdk
from spotfit.controller.budget_store import BudgetStore
from spotfit.controller.loop import Controller
from spotfit.errors import UsageError
from spotfit.host.home import home
from spotfit.host.settings import TeamBudget
from spotfit.spec import JobSpec
from spotfit.state import StateDB
from spotfit.state.states import JobState, StopRequest
from tests.support.postgres import schema_url
from tests.support.stand_in import START, ZONE, RunsUntilSignalled, first_minute_usd
from tests.support.wait import wait_for


@pytest.fixture
def shared_state(postgres, monkeypatch, request) -> str:
    url = schema_url(postgres.url, f"t_budget_{request.node.name[:40].lower()}")
    monkeypatch.setenv("SPOTFIT_STATE_URL", url)
    return url


def _billed(db: StateDB, job_id: str, usd: float, labels: dict) -> None:
    """A finished job of `labels` whose one attempt, launched now, was billed `usd`."""
    spec = JobSpec.model_validate({"name": "before", "script": "t.py", "labels": labels, "market": {"trace": None}})
    db.create_job(job_id, "before", spec.model_dump_json(), "memory://before")
    number = db.add_attempt(job_id, backend="local", zone=None, market="on_demand", state="completed")
    db.update_attempt(job_id, number, billed_s=3600.0, cost_usd=usd)
    db.move_job(job_id, JobState.COMPLETED, "set by the test")


def _waiting_job(db: StateDB, job_id: str, tmp_path) -> None:
    spec = JobSpec.model_validate({"name": job_id, "script": "train.py", "labels": {"project": "nlp"}, "work_h": 1.0,
                                   "market": {"trace": "aws-v100", "zones": [ZONE], "start": START}})
    # In the controller's own store: a shared state's controller writes nowhere else (spotfit/host/confine.py).
    db.create_job(job_id, job_id, spec.model_dump_json(), f"file://{home() / 'store' / 'jobs' / job_id}")


def test_two_controllers_on_one_postgresql_do_not_both_launch_past_a_budget(shared_state, tmp_path):
    db = StateDB(shared_state)
    _billed(db, "before-1", 5.0, {"project": "nlp"})
    for job_id in ("a-1", "b-1"):
        _waiting_job(db, job_id, tmp_path)
    expected = Controller(db, "a-1", backend=RunsUntilSignalled(), poll_s=0.0).rules._expected_launch_usd()
    assert expected > 0  # an hour of work at the zone's spot price
    # Either launch alone fits ($5 billed, under the budget); the two together do not.
    BudgetStore(shared_state).set_budget(TeamBudget(name="nlp-month", labels={"project": "nlp"},
                                                    usd=5.0 + expected / 2, at_80_percent="none"))
    barrier = threading.Barrier(2)
    halted: dict[str, bool] = {}

    def controller(job_id: str) -> None:  # its own connection, as another host's controller has
        controller = Controller(StateDB(shared_state), job_id, backend=RunsUntilSignalled(), poll_s=0.0)
        barrier.wait(timeout=120)
        halted[job_id] = controller.apply(controller.rules.halt_before_launch())  # the loop applies the pause

    threads = [threading.Thread(target=controller, args=(job_id,)) for job_id in ("a-1", "b-1")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert sorted(halted.values()) == [False, True], halted  # exactly one launches
    [waits] = [job_id for job_id, halt in halted.items() if halt]
    [goes] = [job_id for job_id, halt in halted.items() if not halt]
    assert db.get_job(waits)["state"] == "paused"
    [event] = [e for e in db.events(waits) if e["kind"] == "team_budget"]
    # The first reserved the room it left: the budget's $5 + expected/2, not its whole expected spend.
    assert event["data"]["action"] == "pause" and event["data"]["spent_usd"] == pytest.approx(5.0 + expected / 2)
    assert not [e for e in db.events(goes) if e["kind"] == "team_budget"]


def test_a_reservation_counts_while_its_attempt_runs_and_then_its_bill_does(shared_state, tmp_path):
    db, store = StateDB(shared_state), BudgetStore(shared_state)
    _waiting_job(db, "a-1", tmp_path)
    budget = TeamBudget(name="nlp", labels={"project": "nlp"}, usd=10.0, at_80_percent="none")
    assert store.reserve("a-1", {"project": "nlp"}, [budget], 8.0).crossings == []
    number = db.add_attempt("a-1", backend="local", zone=ZONE, market="spot", state="running")
    late = 1e12  # long after the reservation's hold: it counts because its attempt is live
    assert store.spent_since(0.0, "b-1", now_s=late) == [({"project": "nlp"}, 8.0)]
    db.update_attempt("a-1", number, state="completed", billed_s=3600.0, cost_usd=3.0)
    assert store.spent_since(0.0, "b-1", now_s=late) == [({"project": "nlp"}, 3.0)]  # the bill, not both
    assert store.spent_since(0.0, "b-1") == [({"project": "nlp"}, 3.0)]  # within the hold too: it was billed


def test_a_running_check_grows_its_reservation_and_counts_the_others(shared_state, tmp_path):
    _grows_and_counts(shared_state, tmp_path)


def test_a_running_check_on_a_shared_sqlite_state_grows_and_counts_the_same(tmp_path):
    _grows_and_counts(str(tmp_path / "state.db"), tmp_path)  # SPOTFIT_STATE_URL=sqlite:////PATH: its write lock


def _grows_and_counts(target: str, tmp_path) -> None:
    db, store = StateDB(target), BudgetStore(target)
    for job_id in ("a-1", "b-1"):
        _waiting_job(db, job_id, tmp_path)
    budget = TeamBudget(name="nlp", labels={"project": "nlp"}, usd=10.0, at_80_percent="none")
    assert store.reserve("a-1", {"project": "nlp"}, [budget], 1.0).crossings == []
    number = db.add_attempt("a-1", backend="local", zone=ZONE, market="spot", state="running")
    launched = db.attempts("a-1")[0]["started_at"]
    assert store.running_check("a-1", {"project": "nlp"}, [budget], 4.0, launched).crossings == []  # more than held
    assert store.spent_since(0.0, "b-1") == [({"project": "nlp"}, 4.0)]  # the other controller sees $4 now
    assert store.running_check("a-1", {"project": "nlp"}, [budget], 2.0, launched).crossings == []  # never shrinks
    assert store.spent_since(0.0, "b-1") == [({"project": "nlp"}, 4.0)]
    db.add_attempt("b-1", backend="local", zone=ZONE, market="spot", state="running")
    b_launched = db.attempts("b-1")[0]["started_at"]
    [over] = store.running_check("b-1", {"project": "nlp"}, [budget], 6.0, b_launched).crossings  # a-1's $4, its $6
    assert (over.action, over.spent_usd) == ("pause", 10.0)
    db.update_attempt("a-1", number, state="completed", billed_s=3600.0, cost_usd=4.5)
    assert store.spent_since(0.0, "b-1") == [({"project": "nlp"}, 4.5)]  # a-1's bill instead of its reservation


def test_a_running_attempt_pauses_on_its_cost_and_another_controllers_reservation(shared_state, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    db, store = StateDB(shared_state), BudgetStore(shared_state)
    for job_id in ("a-1", "b-1"):
        _waiting_job(db, job_id, tmp_path)
    # Another controller launched a-1: its reservation counts while its attempt runs. b-1 fits beside it
    # at its launch, and passes the budget with the first minute of its own bill.
    budget = TeamBudget(name="nlp", labels={"project": "nlp"}, usd=50.0 + first_minute_usd() / 2,
                        at_80_percent="none")
    store.set_budget(budget)
    assert store.reserve("a-1", {"project": "nlp"}, [budget], 50.0).crossings == []
    db.add_attempt("a-1", backend="local", zone=ZONE, market="spot", state="running")
    backend = RunsUntilSignalled(max_launches=1)
    controller = Controller(StateDB(shared_state), "b-1", backend=backend, poll_s=0.0)
    ended: dict[str, str] = {}
    thread = threading.Thread(target=lambda: ended.setdefault("state", controller.run()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: ended.get("state"), 120, "b-1's controller to pause the job")
    finally:
        if thread.is_alive():  # it missed the budget: end it
            db.update_job("b-1", cancel_requested=StopRequest.CANCEL)
            thread.join(60)
    assert ended["state"] == "paused" and backend.launches == 1 and backend.signalled == {"h1"}
    [event] = [e for e in db.events("b-1") if e["kind"] == "team_budget"]
    assert event["data"]["action"] == "pause" and event["attempt"] == 1
    assert event["data"]["spent_usd"] >= 50.0 + first_minute_usd() - 1e-6  # a-1's $50 and b-1's bill


def test_shared_budgets_are_set_listed_and_removed_and_win_over_the_file(shared_state, spotfit_home):
    spotfit_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (spotfit_home / "config.yaml").write_text('{"budgets": [{"name": "nlp", "usd": 1}, {"name": "cv", "usd": 2}]}')
    doc = sdk.budget_set("nlp", 500.0, ["project=nlp"], shared=True)
    assert {(b["name"], b["where"], b["usd"]) for b in doc["budgets"]} == {("nlp", "shared", 500.0),
                                                                           ("cv", "file", 2.0)}
    assert doc["shared"] is not None
    left = sdk.budget_rm("nlp", shared=True)["budgets"]
    assert {(b["name"], b["where"], b["usd"]) for b in left} == {("nlp", "file", 1.0), ("cv", "file", 2.0)}


def test_shared_needs_a_shared_state_db():
    with pytest.raises(UsageError, match="SPOTFIT_STATE_URL is not set"):
        sdk.budget_set("nlp", 5.0, shared=True)
