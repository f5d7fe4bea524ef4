"""The state DB's reads across jobs (`cost --all`, team budgets), on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.support.statejobs import add_job


def _attempt(db, job_id: str, started_at: float, cost_usd: float | None) -> None:
    number = db.add_attempt(job_id, backend="local", zone="z", market="spot", state="completed",
                            started_at=started_at, info={"k": 1})
    if cost_usd is not None:
        db.update_attempt(job_id, number, billed_s=60.0, cost_usd=cost_usd)


def test_jobs_since_gives_each_job_created_in_the_window_with_its_attempts(db):
    add_job(db, "old-1", "old", created_at=100.0)
    add_job(db, "new-1", "new", created_at=200.0)
    add_job(db, "new-2", "new", created_at=300.0)
    for job_id in ("old-1", "new-1"):
        _attempt(db, job_id, 1.0, 1.0)
        _attempt(db, job_id, 2.0, None)
    found = db.jobs_since(200.0)
    assert [(job["id"], [a["number"] for a in attempts]) for job, attempts in found] == [
        ("new-1", [1, 2]), ("new-2", [])]
    assert found[0][1][0]["info"] == {"k": 1} and found[0][1][0]["cost_usd"] == 1.0


def test_billed_since_sums_each_jobs_billed_attempts_launched_in_the_period(db):
    add_job(db, "a-1", "a")
    add_job(db, "b-1", "b")
    _attempt(db, "a-1", 50.0, 5.0)  # before the period
    _attempt(db, "a-1", 150.0, 1.25)
    _attempt(db, "a-1", 160.0, 2.5)
    _attempt(db, "a-1", 170.0, None)  # still running: not billed yet
    _attempt(db, "b-1", 10.0, 7.0)
    assert db.billed_since(100.0) == [({"name": "a"}, 3.75)]


def test_jobs_since_leaves_out_the_jobs_whose_spend_entry_is_kept_in_this_version(db):
    for job_id, created in (("a-1", 100.0), ("b-1", 200.0), ("c-1", 300.0)):
        add_job(db, job_id, job_id[0], created_at=created)
        _attempt(db, job_id, created, 1.0)
    db.keep_cost_docs("v1", {"a-1": "{}", "b-1": "{}"}, {"a-1": '{"e": "a"}', "b-1": '{"e": "b"}'})
    db.keep_cost_docs("v0", {"c-1": "{}"}, {"c-1": '{"e": "old"}'})  # another version's: not kept for v1
    assert [(job["id"], len(attempts)) for job, attempts in db.jobs_since(150.0, unkept="v1")] == [("c-1", 1)]
    assert db.kept_spend_entries("v1", 150.0) == {"b-1": '{"e": "b"}'}
    db.keep_cost_docs("v1", {"b-1": '{"doc": 2}'})  # a document kept again keeps its version's entry
    assert db.kept_spend_entries("v1", 0.0) == {"a-1": '{"e": "a"}', "b-1": '{"e": "b"}'}
    db.keep_cost_docs("v2", {"b-1": '{"doc": 3}'})  # another version drops it
    assert db.kept_spend_entries("v2", 0.0) == {} and db.kept_spend_entries("v1", 0.0) == {"a-1": '{"e": "a"}'}


def test_an_optimum_is_kept_once_by_its_key(db):
    assert db.kept_optimum("k1") is None
    db.keep_optima({"k1": {"optimum_usd": 1.5, "window": {"zones": ["z"]}}})
    db.keep_optima({"k1": {"optimum_usd": 9.0, "window": {}}})  # the first stays: a key is one window
    assert db.kept_optimum("k1") == {"optimum_usd": 1.5, "window": {"zones": ["z"]}} and db.kept_optima_count() == 1
