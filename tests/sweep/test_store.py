"""The sweep DB: the sweep's lease decides which sweep controller drives it; older files migrate.

The lease is the job's (`spotfit/state/lease.py`): a holder on another host keeps a sweep until its
lease expires (its pid means nothing here); on this host a dead holder's pid frees it at once.
`SweepRunner` and `sweep resume` ask the lease, not a pid, before driving a sweep. The lease
and batch tests run on both dialects: SQLite under $SPOTFIT_HOME and a real PostgreSQL
(`SPOTFIT_STATE_URL`, a schema of the test's own on the session's server). On PostgreSQL a batch's
queued job is released together with its hand-over record, or not at all.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import zlib

import pytest

from spotfit.errors import UsageError
from spotfit.host.home import state_target
from spotfit.state import lease
from spotfit.state.db import StateDB
from spotfit.state.states import JobState
from spotfit.sweep import api
from spotfit.sweep.runner import SweepRunner, controller_alive, db
from spotfit.sweep.store import SweepDB
from tests.support.postgres import schema_url

ELSEWHERE = lease.Holder("node-b", 4242, "t1")  # another host: only the lease's expiry counts


@pytest.fixture(params=["sqlite", "postgresql"])
def dialect(request, monkeypatch) -> str:
    """The state (and so the sweep DB) on SQLite, then on PostgreSQL."""
    if request.param == "postgresql":
        server = request.getfixturevalue("postgres")
        schema = f"t_store_{zlib.crc32(request.node.nodeid.encode()):08x}"  # empty tables for each test
        monkeypatch.setenv("SPOTFIT_STATE_URL", schema_url(server.url, schema))
    return request.param


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _sweep(tmp_path) -> str:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "spotfit.yaml").write_text("name: tiny\nscript: train.py\n")
    (tmp_path / "sweep.yaml").write_text("job: spotfit.yaml\nparams: {lr: {uniform: [0.1, 0.2]}}\n"
                                         "objective: {metric: val_accuracy}\ntrials: 1\n")
    return api.start(str(tmp_path / "sweep.yaml"))


def test_a_live_lease_on_another_host_keeps_every_other_controller_out(tmp_path, dialect):
    sweep_id = _sweep(tmp_path)
    sweeps = db()
    assert sweeps.claim_lease("sweeps", sweep_id, ELSEWHERE, ttl_s=600)
    assert controller_alive(sweeps.get_sweep(sweep_id))
    with pytest.raises(UsageError, match=f"Sweep {sweep_id} already has a live controller \\(node-b/4242/t1"):
        api.resume(sweep_id)
    with pytest.raises(UsageError, match="already has a live controller"):
        SweepRunner(sweep_id).run()
    assert db().get_sweep(sweep_id)["lease_owner"] == ELSEWHERE.key  # untouched by the refused ones


def test_an_expired_lease_or_a_dead_pid_on_this_host_frees_the_sweep(tmp_path, dialect):
    sweep_id = _sweep(tmp_path)
    sweeps = db()
    assert sweeps.claim_lease("sweeps", sweep_id, ELSEWHERE, ttl_s=600)
    sweeps.update_sweep(sweep_id, lease_expires_at=sweeps._db.now() - 1)  # it stopped renewing
    assert not controller_alive(sweeps.get_sweep(sweep_id))
    local_dead = lease.Holder(lease.this_host(), _dead_pid(), "t2")
    assert sweeps.claim_lease("sweeps", sweep_id, local_dead, ttl_s=600)  # the expired one is taken over
    assert not controller_alive(sweeps.get_sweep(sweep_id))  # its pid is gone: no wait for the expiry
    me = lease.this_process()
    assert sweeps.claim_lease("sweeps", sweep_id, me, ttl_s=600)
    with pytest.raises(lease.LeaseLost):  # the heartbeat of the holder it was taken from fails
        sweeps.renew_lease("sweeps", sweep_id, local_dead, ttl_s=600)


def test_a_batch_records_its_jobs_hand_overs_and_groups(dialect):
    sweeps = db()
    sweeps.add_batch("batch-1", ["a-1", "b-1"], parallel=1)
    sweeps.batch_job_started("batch-1", "a-1", 4242)
    assert [(r["job_id"], r["started_at"] is not None, r["controller_pid"]) for r in db().batch_jobs("batch-1")] == \
        [("a-1", True, 4242), ("b-1", False, None)]
    assert db().get_batch("batch-1")["parallel"] == 1 and db().group_of() == {"a-1": "batch-1", "b-1": "batch-1"}
    assert sweeps.claim_lease("batches", "batch-1", ELSEWHERE, ttl_s=600)
    assert not db().claim_lease("batches", "batch-1", lease.this_process(), ttl_s=600)



def test_on_postgres_a_queued_job_is_released_with_its_hand_over_record_or_not_at_all(postgres, monkeypatch):
    monkeypatch.setenv("SPOTFIT_STATE_URL", schema_url(postgres.url, "t_store_release"))
    state, sweeps = StateDB(state_target()), db()
    for job_id in ("a-1", "b-1"):
        state.create_job(job_id, job_id, spec_json="{}", store_url="memory://s", state=JobState.QUEUED)
    sweeps.add_batch("batch-1", ["a-1", "b-1"], parallel=1)
    state.move_job("b-1", JobState.CANCELLED, "set by the test")
    assert sweeps.release_queued("batch-1", "a-1", "a slot is free")
    assert not sweeps.release_queued("batch-1", "b-1", "a slot is free")  # cancelled meanwhile: left as it is
    assert not sweeps.release_queued("batch-1", "a-1", "again")  # released once only
    assert [(j, state.get_job(j)["state"]) for j in ("a-1", "b-1")] == [("a-1", "pending"), ("b-1", "cancelled")]
    assert [(r["job_id"], r["started_at"] is not None) for r in sweeps.batch_jobs("batch-1")] == \
        [("a-1", True), ("b-1", False)]


FIRST_RELEASE = """
CREATE TABLE sweeps (id TEXT PRIMARY KEY, name TEXT NOT NULL, spec_json TEXT NOT NULL,
    options_json TEXT NOT NULL DEFAULT '{}', state TEXT NOT NULL DEFAULT 'running', message TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, controller_pid INTEGER, controller_seen_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0);
CREATE TABLE trials (sweep_id TEXT NOT NULL REFERENCES sweeps(id), number INTEGER NOT NULL, job_id TEXT,
    state TEXT NOT NULL DEFAULT 'creating', params_json TEXT NOT NULL, value REAL, rung INTEGER NOT NULL DEFAULT 0,
    events_seen INTEGER NOT NULL DEFAULT 0, promotions INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (sweep_id, number));
CREATE TABLE batches (batch_id TEXT NOT NULL, job_id TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (batch_id, job_id));
INSERT INTO sweeps (id, name, spec_json, created_at, updated_at) VALUES ('d-sweep-ab12cd', 'd', '{}', 1, 1);
INSERT INTO trials (sweep_id, number, job_id, state, params_json, value)
    VALUES ('d-sweep-ab12cd', 0, 'd-sweep-ab12cd-t000-x', 'completed', '{"lr": 0.1}', 0.9);
INSERT INTO batches VALUES ('batch-1', 'a-1', 0);
"""


def test_a_sweeps_db_of_the_first_release_keeps_its_rows(tmp_path):
    path = tmp_path / "sweeps.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(FIRST_RELEASE)
    conn.close()
    for _ in range(2):  # migrated once, then opened as it is
        sweeps = SweepDB(path)
        assert [(t["number"], t["state"], t["params"]) for t in sweeps.trials("d-sweep-ab12cd")] == \
            [(0, "completed", {"lr": 0.1})]
        assert sweeps.group_of() == {"d-sweep-ab12cd-t000-x": "d-sweep-ab12cd", "a-1": "batch-1"}
        assert sweeps.batch("batch-1") == ["a-1"]
        assert sweeps.claim_lease("sweeps", "d-sweep-ab12cd", lease.this_process(), ttl_s=5)
        sweeps.close()
    assert json.loads(SweepDB(path).get_sweep("d-sweep-ab12cd")["options_json"]) == {}
