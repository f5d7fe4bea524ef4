"""A batch's queue killed with SIGKILL mid-batch: `spotfit batch resume` finishes it, no job run twice or lost.

Three jobs, two at once, on hollow attempts. They wait for a `go` file, so the test (not the machine's
speed) decides when they end. The detached queue hands the first two to controllers; the test
kills the queue by its PID (read from the batch's lease, and checked to be that queue) while
both run and the third is queued. The jobs go on under their own controllers. The resumed
queue must leave the two running jobs alone and keep the third queued while no slot is free
(checked after a whole pass of the new queue), then start it once one of the first two ended.
Every job ends with exactly one attempt and one launch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import psutil
import pytest

from spotfit import sdk
from spotfit.sdk import batch
from spotfit.state import lease
from spotfit.state.states import JobState
from spotfit.sweep.runner import db
from tests.support.jobs import spotfit_cmd
from tests.support.wait import wait_for
from tests.sweep.tiny import batch_specs


@pytest.fixture
def killed_queue():
    """The queues the test kills or starts: those still running at the end are killed by PID."""
    started: list[psutil.Process] = []
    yield started
    for proc in started:
        if proc.is_running():
            os.killpg(proc.pid, signal.SIGKILL)


def _queue_lease(batch_id: str, other_than: str | None = None) -> tuple[str, float] | None:
    row = db().get_batch(batch_id)
    if row["lease_owner"] is None or row["lease_owner"] == other_than:
        return None
    return row["lease_owner"], row["lease_expires_at"]


@pytest.mark.slow
def test_a_killed_queue_is_resumed_without_running_a_job_twice_or_losing_one(tmp_path, killed_queue):
    go = tmp_path / "go"
    specs = batch_specs(tmp_path, go)
    out = subprocess.run(spotfit_cmd("submit", *specs, "--parallel", "2", "--json"), capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    batch_id, (first, second, third) = doc["id"], doc["jobs"]

    owner, _ = wait_for(lambda: _queue_lease(batch_id), 120, "the detached queue to take the batch's lease")
    queue = psutil.Process(lease.Holder.parse(owner).pid)
    assert queue.cmdline()[-2:] == ["spotfit.sdk.batch", batch_id], queue.cmdline()  # that queue, nothing else
    killed_queue.append(queue)
    wait_for(lambda: all(sdk.db().get_job(j)["state"] == JobState.RUNNING for j in (first, second)), 240,
             "the first two jobs to run")
    queue.send_signal(signal.SIGKILL)
    queue.wait(60)
    assert sdk.db().get_job(third)["state"] == JobState.QUEUED

    resumed = subprocess.Popen(spotfit_cmd("batch", "resume", batch_id, "--json"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    killed_queue.append(psutil.Process(resumed.pid))
    owner, claimed = wait_for(lambda: _queue_lease(batch_id, other_than=owner), 120, "the new queue's lease")
    renewed = wait_for(lambda: (e := _queue_lease(batch_id)[1]) > claimed and e, 120, "the new queue's first pass")
    wait_for(lambda: _queue_lease(batch_id)[1] > renewed, 120, "the end of the new queue's first pass")
    rows = {r["job_id"]: r for r in db().batch_jobs(batch_id)}
    assert rows[third]["started_at"] is None and sdk.db().get_job(third)["state"] == JobState.QUEUED  # no slot
    for job_id in (first, second):
        assert sdk.db().get_job(job_id)["state"] == JobState.RUNNING

    go.write_text("go")
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr[-3000:]
    assert [j["state"] for j in json.loads(stdout)["jobs"]] == ["completed"] * 3
    for job_id in (first, second, third):
        assert len(sdk.db().attempts(job_id)) == 1, job_id
        assert sum(e["kind"] == "launch" for e in sdk.db().events(job_id)) == 1, job_id
    ended = min(sdk.db().attempts(j)[0]["ended_at"] for j in (first, second))
    assert sdk.db().attempts(third)[0]["started_at"] >= ended  # it waited for a free slot
    assert db().get_batch(batch_id)["state"] == "completed" and db().get_batch(batch_id)["lease_owner"] is None


def _row(pid: int | None) -> dict:
    return {"job_id": "j", "started_at": 1.0, "controller_pid": pid}


def _job(state: str = "pending", owner: str | None = None) -> dict:
    return {"id": "j", "state": state, "lease_owner": owner}


def test_a_job_whose_controller_died_before_its_lease_is_handed_over_again():
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert batch._lost_before_its_lease(_row(dead.pid), _job(), shared=False)
    assert batch._lost_before_its_lease(_row(None), _job(), shared=False)  # the queue died before starting one
    assert not batch._lost_before_its_lease(_row(os.getpid()), _job(), shared=False)  # still starting
    assert not batch._lost_before_its_lease(_row(dead.pid), _job(owner="h/1/t"), shared=False)  # it took the job
    assert not batch._lost_before_its_lease(_row(dead.pid), _job(state="running"), shared=False)
    assert not batch._lost_before_its_lease(_row(None), _job(), shared=True)  # a shared state's controllers take it
