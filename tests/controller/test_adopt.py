"""A controller SIGKILLed inside the launch window: its successor looks before it calls the attempt killed.

Each test holds a real controller process at a crash point (`spotfit.core.crashpoints`),
kills it there with SIGKILL, and starts a new controller process, which must:

- adopt the attempt's runtime process when it still runs (no second attempt is launched);
- close the attempt from its exit record when it ended while no controller watched;
- call the attempt killed only when nothing was launched.

The attempts are hollow (spotfit/hollow/), and the first one stands still in its first step until
the test creates a `go` file, so the test, not the machine's speed, decides whether the runtime is
still running when the new controller looks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from spotfit import sdk
from spotfit.backends.local_process import LocalHandle
from spotfit.core.crashpoints import HOLD_ENV
from tests.support.hollow_jobs import write_hollow_spec
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

DEADLINE_S = 240.0


@pytest.fixture
def job(tmp_path, hollow):
    """A submitted job (1 epoch of 4 steps) whose first attempt waits in step 1 for `tmp_path/go`:
    (job id, go file); its runtimes die at the end."""
    spec = write_hollow_spec(tmp_path / "job", "name: adopt\nscript: train.py\nmarket: {trace: null}\n",
                             epochs=1, steps_per_epoch=4, pause_at=1, pause_dir=str(tmp_path))
    go = tmp_path / "go"
    job_id = sdk.submit(str(spec))
    yield job_id, go
    for pid in _runtime_pids(sdk.status(job_id)["store"]):  # started by this test's controllers
        os.killpg(pid, signal.SIGKILL)


def _wait_for(what: str, predicate, timeout_s: float = DEADLINE_S):
    return wait_for(predicate, timeout_s, what)


def _controller(job_id: str, log: Path, hold: str | None, processes: list[psutil.Process]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != HOLD_ENV}
    if hold:
        env[HOLD_ENV] = hold
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "spotfit.controller", job_id], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    processes.append(psutil.Process(proc.pid))
    return proc


def _kill_at(job_id: str, point: str, tmp_path: Path, processes: list[psutil.Process], before_kill=None) -> None:
    """Start a controller, let it reach `point`, (run `before_kill`), SIGKILL it there."""
    holds = tmp_path / "holds"
    holds.mkdir()
    first = _controller(job_id, tmp_path / "controller-1.log", f"{point}:{holds}", processes)
    _wait_for(f"the controller to reach the crash point {point!r} (log: {tmp_path / 'controller-1.log'})",
              lambda: (holds / f"{point}.reached").exists() or first.poll() is not None)
    assert first.poll() is None, (tmp_path / "controller-1.log").read_text()[-3000:]
    [attempt] = sdk.status(job_id)["attempts"]
    assert attempt["state"] == "launching"  # recorded, no handle stored
    assert sdk.db().attempts(job_id)[0]["handle"] is None
    if before_kill is not None:
        before_kill()
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)  # reaped: its pid no longer counts as a live controller


def _runtime_pids(job_url: str) -> list[int]:
    """Live (not zombie) runtime processes of the job, found independently of the backend."""
    pids = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if "spotfit.runtime" in cmdline and job_url in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            pids.append(proc.pid)
    return pids


def _finish(job_id: str, tmp_path: Path, processes: list[psutil.Process],
            second: subprocess.Popen | None = None) -> dict:
    """Let a new controller (started here unless given) drive the job to its end."""
    second = second or _controller(job_id, tmp_path / "controller-2.log", None, processes)
    try:
        second.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the second controller did not finish the job in {DEADLINE_S:.0f}s: "
                             f"{sdk.status(job_id)}") from None
    assert second.returncode == 0, (tmp_path / "controller-2.log").read_text()[-3000:]
    return {**sdk.status(job_id), "events": sdk.events(job_id)}


def test_a_running_attempt_whose_handle_was_never_stored_is_adopted(job, tmp_path, processes):
    job_id, go = job
    job_url = sdk.status(job_id)["store"]
    _kill_at(job_id, "launched", tmp_path, processes)
    [runtime] = _wait_for("the runtime process the killed controller launched", lambda: _runtime_pids(job_url))
    processes.append(psutil.Process(runtime))
    second = _controller(job_id, tmp_path / "controller-2.log", None, processes)
    _wait_for("the new controller to adopt attempt 1 (or to close it)",
              lambda: any(e["kind"] in ("adopted", "attempt_killed") for e in sdk.events(job_id))
              or second.poll() is not None)
    assert processes[-1].is_running()  # still waiting for `go`: it was found alive, not after it ended
    row = sdk.db().attempts(job_id)[0]
    assert row["state"] == "running", sdk.events(job_id)
    assert LocalHandle.from_json(row["handle"]).chief.pid == runtime
    go.touch()
    doc = _finish(job_id, tmp_path, processes, second)
    assert doc["state"] == "completed", doc
    assert [a["state"] for a in doc["attempts"]] == ["completed"]  # adopted, not killed and relaunched
    [adopted] = [e for e in doc["events"] if e["kind"] == "adopted"]
    assert "found by the local backend" in adopted["message"]


def test_an_attempt_that_ended_while_no_controller_watched_is_closed_from_its_exit_record(job, tmp_path,
                                                                                          processes):
    job_id, go = job
    job_url = sdk.status(job_id)["store"]
    job_dir = Path(job_url[len("file://"):])

    def run_to_the_end():
        go.touch()
        _wait_for("the runtime's exit record", lambda: (job_dir / "attempts/0001/exit.json").exists())
        _wait_for("the runtime process to end", lambda: not _runtime_pids(job_url))

    _kill_at(job_id, "launched", tmp_path, processes, before_kill=run_to_the_end)
    doc = _finish(job_id, tmp_path, processes)
    assert doc["state"] == "completed", doc
    assert [(a["state"], a["exit_code"]) for a in doc["attempts"]] == [("completed", 0)]
    assert any(e["kind"] == "attempt_completed" and "ended while no controller watched" in e["message"]
               for e in doc["events"])


def test_an_attempt_killed_before_its_launch_is_killed_and_relaunched(job, tmp_path, processes):
    job_id, go = job
    go.touch()
    _kill_at(job_id, "launching", tmp_path, processes)
    assert not _runtime_pids(sdk.status(job_id)["store"])  # nothing was launched
    doc = _finish(job_id, tmp_path, processes)
    assert doc["state"] == "completed", doc
    assert [a["state"] for a in doc["attempts"]] == ["killed", "completed"]
    assert any(e["kind"] == "attempt_killed" and "nothing it started was found" in e["message"]
               for e in doc["events"])
