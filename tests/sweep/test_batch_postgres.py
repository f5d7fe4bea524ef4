"""A batch on a team's PostgreSQL state: `--parallel` holds against the long-running controllers.

With `SPOTFIT_STATE_URL` on a real PostgreSQL server (the session's `postgres` fixture, a schema
of this test's own) and one `spotfit controller` on it, which takes every pending job it can,
`spotfit submit a b c --parallel 2` records the jobs `queued` and its detached queue releases
them one free slot at a time. The jobs (hollow attempts) wait for a `go` file, so the test (not the
machine's speed) decides when they end. While the first two run, the third stays queued through
whole passes of the queue and of the controller; once `go` exists all three complete, each with
exactly one attempt, and the third's attempt started only after one of the first two ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import psutil
import pytest

from spotfit import sdk
from spotfit.state import lease
from spotfit.state.db import StateDB
from spotfit.state.states import JobState
from spotfit.sweep.runner import db
from spotfit.sweep.store import SweepDB
from tests.support.jobs import spotfit_cmd
from tests.support.postgres import schema_url
from tests.support.wait import wait_for
from tests.sweep.tiny import batch_specs

pytestmark = pytest.mark.slow


@pytest.fixture
def shared_state(postgres, tmp_path, monkeypatch):
    """The state's URL (this process reads it too), one `spotfit controller` on it, and a list of the
    queues the test found: every process still running at the end is killed by PID (its process group)."""
    url = schema_url(postgres.url, "t_batch_pg")
    monkeypatch.setenv("SPOTFIT_STATE_URL", url)
    with open(tmp_path / "controller.log", "wb") as log:
        proc = subprocess.Popen(spotfit_cmd("controller", "--scan-s", "0.2", "--poll-s", "0.1"), env={**os.environ},
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    started = [psutil.Process(proc.pid)]
    yield started
    for handle in started:
        if handle.is_running():
            os.killpg(handle.pid, signal.SIGKILL)
    proc.wait(60)


def _heartbeat(state: StateDB, sweeps: SweepDB, batch_id: str) -> tuple[float, float] | None:
    """The batch queue's lease expiry and the controller's last scan, once both are recorded."""
    expires_at, scans = sweeps.get_batch(batch_id)["lease_expires_at"], state.live_controllers(600.0)
    return None if expires_at is None or not scans else (expires_at, scans[0]["seen_at"])


def test_parallel_holds_a_batch_back_from_the_shared_states_controllers(shared_state, tmp_path):
    state, sweeps = sdk.db(), db()  # one connection each, on SPOTFIT_STATE_URL
    go = tmp_path / "go"
    out = subprocess.run(spotfit_cmd("submit", *batch_specs(tmp_path, go), "--parallel", "2", "--json"),
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    batch_id, (first, second, third) = doc["id"], doc["jobs"]
    owner = wait_for(lambda: sweeps.get_batch(batch_id)["lease_owner"], 120, "the detached queue to take its lease")
    queue = psutil.Process(lease.Holder.parse(owner).pid)
    assert queue.cmdline()[-2:] == ["spotfit.sdk.batch", batch_id], queue.cmdline()  # that queue, nothing else
    shared_state.append(queue)

    wait_for(lambda: all(state.get_job(j)["state"] == JobState.RUNNING for j in (first, second)), 240,
             "the first two jobs to run")
    # Two whole passes of the queue (its lease renewed) and two scans of the controller after both ran.
    def beat() -> tuple[float, float] | None:
        return _heartbeat(state, sweeps, batch_id)

    seen = wait_for(beat, 60, "the queue's lease and the controller's heartbeat")
    for _ in range(2):
        seen = wait_for(lambda s=seen: (h := beat()) and h[0] > s[0] and h[1] > s[1] and h, 120,
                        "the next pass of the queue and scan of the controller")
    assert state.get_job(third)["state"] == JobState.QUEUED and state.attempts(third) == []
    assert {r["job_id"]: r["started_at"] for r in sweeps.batch_jobs(batch_id)}[third] is None

    go.write_text("go")
    queue.wait(600)  # the queue ends once it saw every job end (psutil.TimeoutExpired after the deadline)
    assert sweeps.get_batch(batch_id)["state"] == "completed"
    for job_id in (first, second, third):
        assert state.get_job(job_id)["state"] == JobState.COMPLETED, state.get_job(job_id)["message"]
        assert len(state.attempts(job_id)) == 1, job_id
        assert sum(e["kind"] == "launch" for e in state.events(job_id)) == 1, job_id
    ended = min(state.attempts(j)[0]["ended_at"] for j in (first, second))
    assert state.attempts(third)[0]["started_at"] >= ended  # it waited for a free slot
    assert sweeps.get_batch(batch_id)["lease_owner"] is None  # released as the queue ended
