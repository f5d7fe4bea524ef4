"""Another process holds the state DB's write lock mid-training: the controller waits it out.

`spotfit run` drives a hollow attempt (spotfit/hollow/), whose scenario takes the script's turn:
at step 30 the script asks for the lock and waits until
the test holds it (`BEGIN IMMEDIATE` on the job's state DB, from this process); it then trains
on. The controller's next write finds the DB locked: it must say so on stderr and retry, never
end (which left the runtime training unsupervised); `spotfit status` must answer, read-only,
while the lock is held. The test holds the lock until the controller has retried three times,
releases it, and the job must finish with every step, the weights, and a `state_wait` event
saying how long it waited. Nothing waits on a wall-clock margin: the marker file and the
controller's own retry lines hand the turns over.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.host.home import state_target
from tests.controller.test_full_disk import MARKET_SCRIPT, SCRIPT
from tests.support.hollow_jobs import reference, write_scenario
from tests.support.jobs import spotfit_cmd
from tests.support.store_faults import status_or_empty, write_job
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def _lock_turn(marks: Path) -> list[dict]:
    """Step 30: the state DB gets locked by the test (the script waits until it is)."""
    return [{"at": 30, "touch": str(marks / "lock-request"), "wait_for": str(marks / "locked")}]


@pytest.mark.usefixtures("hollow")
def test_the_controller_waits_out_a_locked_state_db_and_status_answers_meanwhile(job_spec, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = write_job(job_spec, tmp_path, SCRIPT, "locked")
    write_scenario(spec.parent, MARKET_SCRIPT, handoffs=_lock_turn(marks))
    env = {**os.environ, "SPOTFIT_STATE_BUSY_TIMEOUT_S": "0.2"}  # each try gives up soon: many retries
    job = subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, stdin=subprocess.DEVNULL, env=env)
    err: list[str] = []
    out: list[str] = []
    readers = [threading.Thread(target=lambda: err.extend(job.stderr), daemon=True),  # type: ignore[arg-type]
               threading.Thread(target=lambda: out.append(job.stdout.read()), daemon=True)]  # type: ignore[union-attr]
    for reader in readers:
        reader.start()
    holder = sqlite3.connect(state_target(), isolation_level=None)
    try:
        wait_for(lambda: (marks / "lock-request").exists() or job.poll() is not None, 300,
                 "the training to reach step 30, where it asks for the lock")
        assert job.poll() is None, "".join(err)[-3000:]
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE jobs SET message = message")  # a write of this transaction: the lock is ours
        (marks / "locked").touch()
        wait_for(lambda: sum("is locked" in line for line in err) >= 3 or job.poll() is not None, 300,
                 "the controller to find the state DB locked and retry three times")
        assert job.poll() is None, f"spotfit run ended while the state DB was locked: {''.join(err)[-3000:]}"
        started = time.monotonic()
        during = sdk.status("locked")  # opens its own connection, as `spotfit status` does
        assert time.monotonic() - started < 2.0
        assert during["state"] == "running" and during["controller"] == "alive", during
        holder.execute("COMMIT")
        wait_for(lambda: job.poll() is not None, 300, "the job to finish once the lock was released")
        for reader in readers:
            reader.join(timeout=60)
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, "".join(err)[-3000:]
    doc = json.loads(out[0])
    assert doc["state"] == "completed" and doc["controller"] == "finished"
    assert [a["state"] for a in doc["attempts"]] == ["completed"]
    assert doc["step"] == 188 and doc["weights_sha256"] == reference(MARKET_SCRIPT, [], seed=7)["weights_sha256"]
    waits = [e for e in sdk.events(doc["id"]) if e["kind"] == "state_wait"]
    assert waits and waits[0]["data"]["reason"] == "locked" and waits[0]["data"]["tries"] >= 3, waits
    assert "was locked by another process" in waits[0]["message"]
    assert status_or_empty("locked")["state"] == "completed"
