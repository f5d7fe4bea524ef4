"""Tests of the state DB's leases: who drives a job, takeovers, release, and racing controllers.

They run on both dialects: SQLite (a file) and PostgreSQL (a real server on 127.0.0.1, the
session's `postgres` fixture, each test in a schema of its own).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from spotfit.errors import NotFoundError
from spotfit.state import lease
from spotfit.state.db import StateDB
from spotfit.state.states import JobState
from tests.support.statejobs import add_job, child_env


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid now names no process
    return proc.pid


ELSEWHERE = lease.Holder("node-b", 4242, "other")  # a controller on another host: its pid means nothing here


def test_lease_refused_while_another_holder_has_it(db):
    add_job(db, "a-1", "a")
    assert db.claim_lease("a-1", ELSEWHERE, ttl_s=60.0)
    job = db.get_job("a-1")
    assert job["lease_owner"] == ELSEWHERE.key and job["controller_pid"] == 4242
    assert db.lease_live(job)
    assert not db.claim_lease("a-1", lease.this_process(), ttl_s=60.0)
    assert db.get_job("a-1")["lease_owner"] == ELSEWHERE.key


def test_lease_holder_may_reclaim_and_renew(db):
    add_job(db, "a-1", "a")
    me = lease.this_process()
    assert db.claim_lease("a-1", me, ttl_s=60.0)
    first = db.get_job("a-1")["lease_expires_at"]
    assert db.claim_lease("a-1", me, ttl_s=60.0)
    db.renew_lease("a-1", me, ttl_s=120.0, step=7)
    job = db.get_job("a-1")
    assert job["lease_expires_at"] > first and job["step"] == 7


def test_expired_lease_is_taken_over_from_another_host(db):
    add_job(db, "a-1", "a")
    assert db.claim_lease("a-1", ELSEWHERE, ttl_s=60.0)
    db.update_job("a-1", lease_expires_at=db.now() - 1.0)  # its holder stopped renewing
    assert not db.lease_live(db.get_job("a-1"))
    me = lease.this_process()
    assert db.claim_lease("a-1", me, ttl_s=60.0)
    assert db.get_job("a-1")["lease_owner"] == me.key


def test_a_dead_holder_on_this_host_frees_the_lease_at_once(db):
    add_job(db, "a-1", "a")
    dead = lease.Holder(lease.this_host(), _dead_pid(), "dead")
    assert db.claim_lease("a-1", dead, ttl_s=600.0)
    assert not db.lease_live(db.get_job("a-1"))
    assert db.claim_lease("a-1", lease.this_process(), ttl_s=60.0)


def test_renewing_a_lease_another_holder_took_raises_lease_lost(db):
    add_job(db, "a-1", "a")
    me = lease.this_process()
    assert db.claim_lease("a-1", me, ttl_s=60.0)
    db.update_job("a-1", lease_expires_at=db.now() - 1.0)
    assert db.claim_lease("a-1", ELSEWHERE, ttl_s=60.0)
    with pytest.raises(lease.LeaseLost) as info:
        db.renew_lease("a-1", me, ttl_s=60.0, step=99)
    assert ELSEWHERE.key in info.value.message
    assert db.get_job("a-1")["step"] == 0  # the loser wrote nothing


def test_release_frees_the_lease_only_for_its_holder(db):
    add_job(db, "a-1", "a")
    me = lease.this_process()
    assert db.claim_lease("a-1", me, ttl_s=60.0)
    db.release_lease("a-1", ELSEWHERE)
    assert db.get_job("a-1")["lease_owner"] == me.key
    db.release_lease("a-1", me)
    assert db.get_job("a-1")["lease_owner"] is None
    assert db.claim_lease("a-1", ELSEWHERE, ttl_s=60.0)


def test_claimable_jobs_are_the_active_ones_nobody_holds(db):
    for job_id in ("a-1", "b-1", "c-1", "d-1"):
        add_job(db, job_id, job_id[0], created_at={"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}[job_id[0]])
    db.move_job("b-1", JobState.COMPLETED, "set by the test")
    db.move_job("c-1", JobState.PAUSED, "set by the test")
    assert db.claim_lease("d-1", ELSEWHERE, ttl_s=60.0)
    assert db.claimable_jobs(lease.this_process()) == ["a-1"]
    assert db.claimable_jobs(ELSEWHERE) == ["a-1", "d-1"]


def test_unknown_job_lease_raises_not_found(db):
    with pytest.raises(NotFoundError):
        db.claim_lease("ghost", lease.this_process(), ttl_s=60.0)


_CLAIMER = textwrap.dedent(
    """
    import sys
    from spotfit.state import lease
    from spotfit.state.db import StateDB

    target, job_id = sys.argv[1:3]
    db = StateDB(target)
    print("ready", flush=True)
    sys.stdin.readline()  # the parent releases every claimer at once
    print("won" if db.claim_lease(job_id, lease.Holder(f"host-{sys.argv[3]}", 1, "t"), 60.0) else "lost", flush=True)
    """
)


def test_of_racing_controllers_exactly_one_wins_the_lease(target):
    db = StateDB(target)
    add_job(db, "a-1", "a")
    env = child_env()
    claimers = [subprocess.Popen([sys.executable, "-c", _CLAIMER, target, "a-1", str(n)], env=env, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for n in range(4)]
    try:
        for proc in claimers:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        for proc in claimers:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        answers = []
        for proc in claimers:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            answers.append(out.strip())
    finally:
        for proc in claimers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert sorted(answers) == ["lost"] * 3 + ["won"]
    winner = answers.index("won")
    assert db.get_job("a-1")["lease_owner"] == f"host-{winner}/1/t"
    db.close()
