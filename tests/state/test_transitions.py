"""A job's state changes only along `state/transitions.py`'s table, checked inside the UPDATE, on both
dialects; and no module outside the state layer writes a job's state itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from spotfit.state import transitions
from spotfit.state.states import JobState, StopRequest

SPOTFIT = Path(__file__).resolve().parents[2] / "spotfit"
TARGETS = [s for s in JobState if s is not JobState.QUEUED]


def test_every_transition_moves_when_the_table_allows_it_and_otherwise_changes_nothing_and_says_so(db):
    """All 9 × 8 pairs (a job in each state, moved to each state but `queued`), on SQLite and PostgreSQL."""
    for source in JobState:
        for to in TARGETS:
            job_id = f"{source}-{to}"
            db.create_job(job_id, job_id, spec_json="{}", store_url="memory://s", state=source)
            db.update_job(job_id, message="before", step=3)
            moved = db.move_job(job_id, to, "after", step=7)
            job, events = db.get_job(job_id), db.events(job_id)
            if transitions.allowed(source, to):
                assert moved and (job["state"], job["message"], job["step"]) == (to, "after", 7), job_id
                assert events == [], job_id
            else:
                assert not moved and (job["state"], job["message"], job["step"]) == (source, "before", 3), job_id
                assert [(e["kind"], e["data"]) for e in events] == \
                    [("state_refused", {"from": str(source), "to": str(to)})], job_id
                assert f"the job is {source}" in events[0]["message"]


def test_what_the_table_promises():
    ended = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)
    assert not any(transitions.allowed(source, to) for source in ended for to in JobState)
    assert [to for to in JobState if transitions.allowed(JobState.STOPPED, to)] == [JobState.PAUSED]  # resumed
    assert [to for to in JobState if transitions.allowed(JobState.QUEUED, to)] == \
        [JobState.PENDING, JobState.FAILED, JobState.CANCELLED]
    assert not transitions.ALLOWED[JobState.QUEUED]
    assert not any(transitions.allowed(source, JobState.PENDING) for source in JobState if source != JobState.QUEUED)


def test_a_completion_sets_the_result_and_a_resume_clears_the_stop_request(db):
    db.create_job("j-1", "j", spec_json="{}", store_url="memory://s", state=JobState.RUNNING)
    assert db.move_job("j-1", JobState.COMPLETED, "completed", result={"step": 94, "weights_sha256": "ab"}, step=94)
    job = db.get_job("j-1")
    assert (job["result_json"], job["step"]) == ('{"step": 94, "weights_sha256": "ab"}', 94)
    db.create_job("j-2", "j", spec_json="{}", store_url="memory://s", state=JobState.STOPPED)
    db.update_job("j-2", cancel_requested=StopRequest.PRUNE)
    assert db.move_job("j-2", JobState.PAUSED, "resuming a stopped job", clear_request=True)
    assert (db.get_job("j-2")["state"], db.get_job("j-2")["cancel_requested"]) == ("paused", 0)


def test_a_state_is_not_set_as_a_column_nor_to_queued(db):
    db.create_job("j-1", "j", spec_json="{}", store_url="memory://s")
    with pytest.raises(ValueError, match="move_job"):
        db.update_job("j-1", state="completed", message="x")
    with pytest.raises(ValueError, match="created"):
        db.move_job("j-1", JobState.QUEUED, "x")
    assert (db.get_job("j-1")["state"], db.get_job("j-1")["message"]) == ("pending", None)


def _state_writes(path: Path) -> list[str]:
    """Where `path` writes a job's state itself: `update_job(..., state=...)` or SQL that sets `jobs`' state."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update_job" \
                and any(k.arg == "state" for k in node.keywords):
            found.append(f"{path}:{node.lineno}: update_job(state=...)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "UPDATE jobs SET" in node.value \
                and "state" in node.value.split("WHERE")[0]:
            found.append(f"{path}:{node.lineno}: {node.value[:60]!r}")
    return found


def test_no_module_outside_the_state_layer_writes_a_jobs_state():
    found = [w for p in sorted(SPOTFIT.rglob("*.py")) if "state" not in p.relative_to(SPOTFIT).parts[:1]
             for w in _state_writes(p)]
    assert found == []
    # The check sees them: the state layer's own transition SQL is found.
    assert _state_writes(SPOTFIT / "state" / "db.py") == [] and _state_writes(SPOTFIT / "state" / "transitions.py")


def _moves(path: Path) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "move_job"]


def test_in_the_controller_only_the_loop_moves_a_job():
    """The controller's parts return a `StateChange` (controller/state_change.py); the loop applies it.
    Outside the controller, only the user's verbs move a job (sdk: cancel, resume)."""
    controller = SPOTFIT / "controller"
    movers = {p.name for p in controller.glob("*.py") if _moves(p)}
    assert movers == {"loop.py"}, sorted(movers)
    elsewhere = {str(p.relative_to(SPOTFIT)) for p in SPOTFIT.rglob("*.py")
                 if p.parent != controller and p.parts[len(SPOTFIT.parts)] != "state" and _moves(p)}
    assert elsewhere == {"sdk/__init__.py"}, sorted(elsewhere)


def test_spotfit_writes_a_jobs_columns_through_named_writes_only():
    """`update_job(**columns)` is for tests and tools that stage a row; spotfit's own writes are named
    (`record_progress`, `set_step`, `set_clock`, `request_stop`, `replace_spec`, `move_job`)."""
    callers = [f"{p.relative_to(SPOTFIT)}:{node.lineno}" for p in sorted(SPOTFIT.rglob("*.py"))
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "update_job"]
    assert callers == []
