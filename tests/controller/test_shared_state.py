"""A team's state on PostgreSQL: submitted from a "laptop", driven by long-running controllers.

A real PostgreSQL server on 127.0.0.1 (the session's `postgres` fixture) holds the state. The
laptop submits with `spotfit run --detach` and starts nothing; two `spotfit controller`
processes, posing as two hosts (`SPOTFIT_CONTROLLER_HOST`, so that neither can see the other's
pid and only the lease decides), race for the job. Exactly one drives it; the test kills that
one by PID while the job's attempt (hollow: spotfit/hollow/) stands still at step 1 until a `go`
file exists (the test, not the machine's speed, decides when training goes on), and the other
takes the job over once the lease has expired, adopts the running attempt and drives it to the
end. The laptop's `status`, `logs` and `cost` read it all from the shared state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from spotfit.hollow import SCENARIO_FILE
from spotfit.state.db import StateDB
from tests.support.gated_script import write_gated_job
from tests.support.jobs import spotfit_cmd
from tests.support.postgres import schema_url
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

LEASE_TTL_S = "3"  # short, so that the takeover comes soon; the test waits on it, never on a margin


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def _json(env: dict, *args: str) -> dict:
    out = _cli(env, *args, "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _controller(env: dict, host: str, log: Path) -> psutil.Process:
    with open(log, "wb") as out:
        proc = subprocess.Popen(spotfit_cmd("controller", "--scan-s", "0.2", "--poll-s", "0.1"),
                                env={**env, "SPOTFIT_CONTROLLER_HOST": host, "SPOTFIT_LEASE_TTL_S": LEASE_TTL_S},
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return psutil.Process(proc.pid)


@pytest.mark.usefixtures("hollow")
def test_job_submitted_from_a_laptop_is_driven_by_one_controller_then_taken_over(
        postgres, tmp_path, processes):
    url = schema_url(postgres.url, "t_shared_e2e")
    env = {**os.environ, "SPOTFIT_STATE_URL": url}
    spec, go = write_gated_job(tmp_path, "shared", "SHARED_GO", epochs=2)
    # The gated script's fit (64 samples in batches of 16), standing still at step 1 until `go` exists.
    (spec.parent / SCENARIO_FILE).write_text(json.dumps({"epochs": 2, "steps_per_epoch": 4, "pause_at": 1,
                                                         "pause_dir": str(go.parent)}))

    # The laptop submits and starts no controller: the job waits for one, and says so.
    out = _cli(env, "run", str(spec), "--detach", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no `spotfit controller` has been seen" in out.stderr
    job_id = json.loads(out.stdout)["id"]
    pending = _json(env, "status", job_id)
    assert (pending["state"], pending["attempts"], pending["controller"]) == ("pending", [], "waiting for one")
    db = StateDB(url)
    assert db.get_job(job_id)["lease_owner"] is None

    # Two controllers on two "hosts" race for it: exactly one drives it.
    logs = {host: tmp_path / f"controller-{host}.log" for host in ("node-a", "node-b")}
    controllers = {host: _controller(env, host, log) for host, log in logs.items()}
    processes.extend(controllers.values())
    job = wait_for(lambda: (j := db.get_job(job_id))["state"] == "running" and j, 240,
                   "one controller to lease the job and launch its attempt")
    holder = job["lease_owner"].split("/")[0]
    other = "node-b" if holder == "node-a" else "node-a"
    runtime = psutil.Process(json.loads(db.attempts(job_id)[0]["handle"])["pid"])
    processes.append(runtime)
    # The other controller scans while the holder lives (a heartbeat starts each scan: two heartbeats
    # after this moment mean a whole scan ran), and leaves the job alone.
    def heartbeat_after(t: float) -> float | None:
        return next((c["seen_at"] for c in db.live_controllers(60.0) if c["host"] == other and c["seen_at"] > t),
                    None)

    start = db.now()
    first = wait_for(lambda: heartbeat_after(start), 120, f"a heartbeat of the controller on {other}")
    wait_for(lambda: heartbeat_after(first), 120, f"the next heartbeat of the controller on {other}")
    assert f"{job_id}: leased" not in logs[other].read_text()
    assert db.get_job(job_id)["lease_owner"].startswith(f"{holder}/")

    # The holder dies (SIGKILL: no goodbye); its lease runs out, and only then the other takes over.
    expires_at = db.get_job(job_id)["lease_expires_at"]
    controllers[holder].send_signal(signal.SIGKILL)
    controllers[holder].wait(60)
    adopted = wait_for(lambda: next((e for e in db.events(job_id) if e["kind"] == "adopted"), None), 120,
                       f"the controller on {other} to take the job over after the lease expired")
    assert adopted["ts"] >= expires_at, "taken over before the holder's lease expired"
    assert f"controller {other}/" in adopted["message"]
    assert db.get_job(job_id)["lease_owner"].startswith(f"{other}/")

    go.write_text("go")
    final = wait_for(lambda: (d := _json(env, "status", job_id))["state"] == "completed" and d, 300,
                     "the job to complete under the second controller")
    assert [a["state"] for a in final["attempts"]] == ["completed"]  # adopted, not launched again
    assert sum(e["kind"] == "launch" for e in db.events(job_id)) == 1
    assert f"{job_id}: leased, driving it" in logs[other].read_text()
    # The controller logs the outcome after its loop returns, which is after the state says completed.
    wait_for(lambda: f"{job_id}: completed" in logs[other].read_text(), 60,
             f"the controller on {other} to log the job's completion")

    # The laptop reads the outcome from the shared state.
    events = _json(env, "logs", job_id)["events"]
    assert {"launch", "adopted", "attempt_completed"} <= {e["kind"] for e in events}
    cost = _json(env, "cost", job_id)
    assert cost["id"] == job_id and len(cost["rows"]) == 1
    assert cost["totals"]["spent_usd"] == pytest.approx(final["cost_usd"])
    db.close()
