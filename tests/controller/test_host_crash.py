"""A host crash (an attempt gone mid-training, no exit record) resumes like a preemption, uncounted.

The controller's rules run against a stand-in backend (no TensorFlow): its first attempt reports
progress, then is gone with no exit code, signal or `exit.json`, as an instance that lost its
host; the next completes. One test does it with real processes: a controller and its (hollow)
runtime SIGKILLed together mid-training, then a new controller.
An attempt gone before its runtime reported a step is still a failure (`no_exit_record`), so a
machine that never boots cannot relaunch for ever.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from spotfit import sdk
from spotfit.backends.base import AttemptStatus
from spotfit.backends.local_process import LocalHandle
from spotfit.controller.loop import Controller
from spotfit.spec.job import JobSpec
from spotfit.stores import open_store
from tests.support.hollow_jobs import write_hollow_spec
from tests.support.wait import wait_for


class _Handle(str):
    def to_json(self) -> str:
        return str(self)


class _HostGoes:
    """Attempt 1 reports `first_step` (None: nothing) and vanishes; later attempts train to step 100 and exit 0."""

    name = "stand-in"
    runs_here = False

    def __init__(self, store_url: str, first_step: int | None):
        self.store = open_store(store_url)
        self.first_step = first_step
        self.launches = 0

    def launch(self, request):
        self.launches += 1
        n = request.attempt
        if n > 1 or self.first_step is not None:
            step = 100 if n > 1 else self.first_step
            progress = {"attempt": n, "step": step, "phase": "training"}
            self.store.write_bytes("progress.json", json.dumps(progress).encode())
        if n > 1:
            self.store.write_bytes("result.json", json.dumps({"step": 100, "weights_sha256": "ab" * 32}).encode())
        return _Handle(f"h{n}")

    def load_handle(self, text: str) -> _Handle:
        return _Handle(text)

    def status(self, handle) -> AttemptStatus:
        if handle == "h1":
            return AttemptStatus(running=False)  # gone: no exit code, no signal, no exit.json
        return AttemptStatus(running=False, exit_code=0)

    def stop(self, handle, grace_s: float = 10.0) -> None:
        pass

    def find(self, request):
        return None


def _run(tmp_path, monkeypatch, first_step: int | None) -> tuple[str, _HostGoes]:
    monkeypatch.setattr("spotfit.controller.classify.check_script", lambda spec, local: None)
    spec = JobSpec.model_validate({"name": "hc", "script": "train.py", "max_failures": 0, "failure_backoff_s": 0,
                                   "market": {"trace": None, "zones": []}})
    url = f"file://{tmp_path}/store"
    sdk.db().create_job("hc-1", "hc", spec.model_dump_json(), url)
    backend = _HostGoes(url, first_step)
    return Controller(sdk.db(), "hc-1", backend=backend, poll_s=0.0).run(), backend


def test_a_host_crash_mid_training_is_not_a_failure(tmp_path, monkeypatch):
    state, backend = _run(tmp_path, monkeypatch, first_step=40)
    assert state == "completed" and backend.launches == 2  # max_failures 0: a counted failure would end the job
    doc = sdk.status("hc-1")
    assert [(a["state"], a["failure"]) for a in doc["attempts"]] == [("killed", "host_crash"), ("completed", None)]
    assert doc["step"] == 100 and doc["weights_sha256"] == "ab" * 32
    ended = [e for e in sdk.events("hc-1") if e["kind"] == "attempt_killed"]
    assert len(ended) == 1 and "host went away" in ended[0]["message"] and "not counted" in ended[0]["message"]
    assert not [e for e in sdk.events("hc-1") if e["kind"] == "backoff"]
    assert [r["failure"] for r in sdk.cost("hc-1")["rows"]] == ["host_crash", None]


@pytest.mark.parametrize("first_step", [None, 0], ids=["no-progress", "step-0"])
def test_an_attempt_gone_before_it_trained_still_counts(tmp_path, monkeypatch, first_step):
    state, backend = _run(tmp_path, monkeypatch, first_step=first_step)
    assert state == "failed" and backend.launches == 1
    doc = sdk.status("hc-1")
    assert [(a["state"], a["failure"]) for a in doc["attempts"]] == [("killed", "no_exit_record")]
    assert "max_failures=0" in doc["message"]


def _controller(job_id: str, log: Path, processes: list) -> subprocess.Popen:
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "spotfit.controller", job_id], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    processes.append(psutil.Process(proc.pid))
    return proc


@pytest.mark.slow
@pytest.mark.usefixtures("hollow")
def test_a_real_host_lost_mid_training_is_resumed_without_using_up_max_failures(tmp_path, processes):
    """Controller and runtime SIGKILLed together at step 3 (the machine gone); `spotfit resume`'s
    controller finds the runtime gone with no exit record and relaunches, with max_failures 0.

    The job trains 1 epoch of 8 steps; its first attempt stands still in step 4, before step 4 is
    counted (it writes `pause/paused` and waits for a `pause/go` that never comes)."""
    pause = tmp_path / "pause"
    pause.mkdir()
    held = pause / "paused"
    spec = write_hollow_spec(tmp_path / "job", "name: crash\nscript: train.py\nmax_failures: 0\n"
                             "market: {trace: null}\n", epochs=1, steps_per_epoch=8, pause_at=4, pause_dir=str(pause))
    job_id = sdk.submit(str(spec))
    job_dir = Path(sdk.status(job_id)["store"][len("file://"):])
    first = _controller(job_id, tmp_path / "controller-1.log", processes)

    def progress_step() -> int:
        try:
            return json.loads((job_dir / "progress.json").read_text()).get("step") or 0
        except (OSError, ValueError):
            return 0

    wait_for(lambda: held.exists() and progress_step() >= 3 or first.poll() is not None, 240,
             "attempt 1 to report step 3 and hold there")
    assert first.poll() is None, (tmp_path / "controller-1.log").read_text()[-3000:]
    [row] = sdk.db().attempts(job_id)
    runtime = LocalHandle.from_json(row["handle"]).chief.pid
    first.send_signal(signal.SIGKILL)  # the host goes away: the controller and the runtime with it
    os.killpg(runtime, signal.SIGKILL)
    first.wait(timeout=30)
    second = _controller(job_id, tmp_path / "controller-2.log", processes)
    assert second.wait(timeout=300) == 0, (tmp_path / "controller-2.log").read_text()[-3000:]
    doc = sdk.status(job_id)
    assert doc["state"] == "completed", doc
    assert [(a["state"], a["failure"]) for a in doc["attempts"]] == [("killed", "host_crash"), ("completed", None)]
    assert doc["step"] == 8 and not (job_dir / "attempts/0001/exit.json").exists()
