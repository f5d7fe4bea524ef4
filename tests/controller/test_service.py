"""`spotfit controller`'s scan: which jobs it takes, what a crash does, and its bad input.

The full run (two controller processes, a kill, a takeover) is tests/controller/test_shared_state.py.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from spotfit.cli import app
from spotfit.controller.service import Service
from spotfit.state import lease
from spotfit.state.db import StateDB
from spotfit.state.states import JobState

ELSEWHERE = lease.Holder("node-b", 4242, "other")


def _service(tmp_path, lines: list[str]) -> Service:
    return Service(str(tmp_path / "state.db"), log=lines.append)


def _job(db: StateDB, job_id: str, spec: dict | None = None, state: str | None = None) -> None:
    db.create_job(job_id, job_id, spec_json=json.dumps(spec or {}), store_url="memory://s")
    if state:
        db.move_job(job_id, JobState(state), "set by the test")


def test_a_scan_leaves_alone_what_another_holds_and_what_is_not_active(tmp_path):
    lines: list[str] = []
    service = _service(tmp_path, lines)
    db = StateDB(tmp_path / "state.db")
    _job(db, "held-1")
    assert db.claim_lease("held-1", ELSEWHERE, ttl_s=600.0)
    _job(db, "paused-1", state="paused")
    _job(db, "done-1", state="completed")
    assert service.scan() == []
    (me,) = db.live_controllers(60.0)
    assert me["id"] == service.holder.key and me["jobs"] == 0


def test_a_scan_skips_a_queued_job_until_its_batch_releases_it(tmp_path):
    service = _service(tmp_path, [])
    db = StateDB(tmp_path / "state.db")
    db.create_job("queued-1", "queued-1", spec_json="{}", store_url="memory://s", state=JobState.QUEUED)
    assert service.scan() == [] and db.get_job("queued-1")["lease_owner"] is None
    assert db.release_queued("queued-1", "a slot is free")
    assert db.claimable_jobs(service.holder) == ["queued-1"]  # pending now: the next scan takes it
    assert not db.release_queued("queued-1", "again")  # released once only


def test_a_job_whose_driver_crashes_is_released_and_rests(tmp_path, monkeypatch):
    from spotfit.controller import loop

    class Crashing:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("a bug in the loop")

    monkeypatch.setattr(loop, "Controller", Crashing)
    lines: list[str] = []
    service = _service(tmp_path, lines)
    db = StateDB(tmp_path / "state.db")
    _job(db, "bad-1")
    assert service.scan() == ["bad-1"]
    assert service.wait_ended("bad-1", 60), "the crashed driver to end"
    assert any("bad-1: controller crashed" in line and "a bug in the loop" in line for line in lines), lines
    assert db.get_job("bad-1")["lease_owner"] is None  # another controller may take it at once
    assert service.scan() == []  # this one leaves it alone for a while: no crash loop
    service.close()


def test_a_job_whose_recorded_spec_no_longer_validates_is_released_and_rests(tmp_path):
    lines: list[str] = []
    service = _service(tmp_path, lines)
    db = StateDB(tmp_path / "state.db")
    _job(db, "old-1", spec={"not": "a spec"})  # as a spec another spotfit version wrote could read here
    assert service.scan() == ["old-1"]
    assert service.wait_ended("old-1", 60)
    (line,) = [line for line in lines if line.startswith("old-1: stopped driving")]
    assert "does not validate with this spotfit" in line and "leaves it alone for 60 s" in line
    assert "Traceback" not in "\n".join(lines)
    assert db.get_job("old-1")["lease_owner"] is None and db.get_job("old-1")["state"] == "pending"
    assert service.scan() == []  # not leased again at every scan
    service.close()


def test_bad_controller_flags_and_settings_end_in_one_error_line(monkeypatch):
    runner = CliRunner()
    out = runner.invoke(app, ["controller", "--scan-s", "0"])
    assert out.exit_code == 2 and "Invalid `--scan-s`: received 0.0" in out.output
    out = runner.invoke(app, ["controller", "--workers", "10"])  # 10 workers and the service: 11 connections
    assert out.exit_code == 2 and "Invalid `--workers`: received 10" in out.output
    monkeypatch.setenv("SPOTFIT_STATE_URL", "mysql://team:s3cret@db/spotfit")
    out = runner.invoke(app, ["list"])
    assert out.exit_code == 2 and "Invalid SPOTFIT_STATE_URL" in out.output
    assert "s3cret" not in out.output
    monkeypatch.delenv("SPOTFIT_STATE_URL")
    monkeypatch.setenv("SPOTFIT_LEASE_TTL_S", "-1")
    out = runner.invoke(app, ["controller"])
    assert out.exit_code == 2 and "Invalid SPOTFIT_LEASE_TTL_S: received '-1'" in out.output


def test_resume_detach_on_a_shared_state_hands_a_paused_job_back_to_the_controllers(tmp_path, monkeypatch):
    from spotfit import sdk

    monkeypatch.setenv("SPOTFIT_STATE_URL", f"sqlite:///{tmp_path / 'team.db'}")
    db = sdk.db()
    _job(db, "paused-1", state="paused")
    doc = sdk.resume("paused-1", detach=True)  # starts no process: the shared state's controllers take it
    assert (doc["state"], doc["controller"]) == ("waiting", "waiting for one")
    assert db.events("paused-1")[-1]["kind"] == "resumed"
    assert db.claimable_jobs(lease.this_process()) == ["paused-1"]
