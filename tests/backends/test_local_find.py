"""`LocalBackend.find`: an attempt's processes, recognized without a handle, by their command line.

The processes here are real but stand in for the runtime: `python -c SLEEP -m spotfit.runtime
JOB_URL N` has the runtime's command line (what `find` reads) and sleeps instead of training.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from spotfit.backends.base import LaunchRequest
from spotfit.backends.local import LocalBackend

SLEEP = "import time; time.sleep(120)"


@pytest.fixture
def fakes():
    """Start stand-in runtime processes; every one still running is killed at the end."""
    started: list[subprocess.Popen] = []

    def start(job_url: str, attempt: int, index: int | None = None, workers: int = 2) -> subprocess.Popen:
        env = None
        if index is not None:
            cluster = {"worker": [f"127.0.0.1:{9000 + i}" for i in range(workers)]}
            env = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})}
        argv = [sys.executable, "-c", SLEEP, "-m", "spotfit.runtime", job_url, str(attempt)]
        proc = subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL)
        started.append(proc)
        deadline = time.monotonic() + 30
        while psutil.Process(proc.pid).cmdline() != argv:  # until exec: before it, the child is a copy of pytest
            assert time.monotonic() < deadline, f"process {proc.pid} did not exec {argv} in 30 s"
            time.sleep(0.01)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _request(job_url: str, attempt: int = 1, workers: int = 1) -> LaunchRequest:
    return LaunchRequest(job_id="j", attempt=attempt, job_url=job_url, zone=None, market="spot", workers=workers)


def test_nothing_launched_is_not_found(tmp_path, fakes):
    fakes(f"file://{tmp_path}/other-job", 1)
    fakes(f"file://{tmp_path}/job", 2)  # another attempt of the job
    assert LocalBackend().find(_request(f"file://{tmp_path}/job")) is None


def test_a_running_attempt_is_found_watched_and_stopped(tmp_path, fakes):
    url = f"file://{tmp_path}/job"
    proc = fakes(url, 1)
    backend = LocalBackend()  # a new controller's: it did not start the process
    handle = backend.find(_request(url))
    assert handle is not None and [p.pid for p in handle.processes] == [proc.pid]
    assert handle.chief.log == f"{tmp_path}/job/logs/attempt-0001.log"
    assert backend.load_handle(handle.to_json()) == handle
    assert backend.status(handle).running
    backend.stop(handle, grace_s=10.0)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert not backend.status(handle).running


def test_a_group_is_found_in_worker_order(tmp_path, fakes):
    url = f"file://{tmp_path}/job"
    worker1, chief = fakes(url, 1, index=1), fakes(url, 1, index=0)
    handle = LocalBackend().find(_request(url, workers=2))
    assert [p.pid for p in handle.processes] == [chief.pid, worker1.pid]
    assert [p.log.rsplit("/", 1)[1] for p in handle.processes] == ["attempt-0001.log", "attempt-0001-w1.log"]


def test_a_group_missing_a_worker_is_killed_and_not_found(tmp_path, fakes):
    url = f"file://{tmp_path}/job"
    lone = fakes(url, 1, index=1)  # the launch died before it started worker 0
    assert LocalBackend().find(_request(url, workers=2)) is None
    assert lone.wait(timeout=30) == -signal.SIGKILL  # it could never train alone
