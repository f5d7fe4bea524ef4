"""Ctrl-C (SIGTERM, SIGHUP) on a foreground `spotfit run`, and a controller killed with SIGKILL: nothing unsupervised.

- Ctrl-C (SIGINT to the `spotfit run` process, as a terminal sends it): the controller asks the
  attempt to save a checkpoint and stop, waits for it, and exits 130 with the job `stopped` and
  a line saying how to go on; no runtime process is left. `spotfit resume` then continues from
  the saved step to the weights of an uninterrupted run.
- SIGKILL of the controller: `status` says the controller is gone and names `spotfit resume
  JOB`; `spotfit resume` adopts the running attempt and finishes it, with the same weights.

The attempts are hollow (spotfit/hollow/). The first one holds in step 30 until the test has done
its part (marker files: it writes `paused`, waits for `go`), so where the signal lands in the
training is fixed whatever the machine's speed; after a Ctrl-C it also stands still in step 31
until it has read the stop request, so it cannot finish before it is asked to stop. Both tests
compare with the uninterrupted hollow run (`uninterrupted`, computed in this process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import psutil
import pytest

from spotfit import sdk
from tests.support.hollow_jobs import reference, write_hollow_spec
from tests.support.jobs import DIGITS, spotfit_cmd
from tests.support.wait import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("hollow")]

SPEC = """name: held
script: train.py
market: {trace: aws-v100, zones: [us-west-2a], start: '2023-02-17T19:16:00', time_scale: 10}
checkpoint: {interval: {steps: 10}, keep: 2}
training: {seed: 7, deterministic: true}
"""
EPOCHS = 4  # of 47 steps


def _runtimes(job_url: str) -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline", "status"])
            if "spotfit.runtime" in (p.info["cmdline"] or []) and job_url in (p.info["cmdline"] or [])
            and p.info["status"] != psutil.STATUS_ZOMBIE]


def _start(tmp_path, marks, **scenario) -> subprocess.Popen:
    """`spotfit run` of the job (its first attempt holds in step 30 for `marks/go`), in the foreground."""
    spec = write_hollow_spec(tmp_path / "held", SPEC, epochs=EPOCHS, pause_at=30, pause_dir=str(marks), **scenario)
    return subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL, env=os.environ.copy(), start_new_session=True)


@pytest.fixture(scope="module")
def uninterrupted() -> dict:
    """Step and weights of the job run without interruption."""
    return reference(DIGITS / "train.py", [], seed=7, epochs=EPOCHS)


def _resume(job_id: str) -> subprocess.Popen:
    return subprocess.Popen(spotfit_cmd("resume", job_id, "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL, env=os.environ.copy(), start_new_session=True)


def _at_step_30(job: subprocess.Popen, marks) -> dict:
    wait_for(lambda: (marks / "paused").exists() or job.poll() is not None, 300, "the training to reach step 30")
    assert job.poll() is None, job.communicate()[1][-3000:]
    return sdk.status("held")


# SIGTERM is what `timeout`, systemd and CI runners send; SIGHUP, a closed terminal. Both do what Ctrl-C does
# (before, SIGTERM left the job `waiting` with "controller: gone").
@pytest.mark.parametrize(("sig", "said", "code"), [(signal.SIGINT, "Ctrl-C", 130), (signal.SIGTERM, "SIGTERM", 143),
                                                   (signal.SIGHUP, "SIGHUP", 129)], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_ctrl_c_stops_the_attempt_with_a_checkpoint_and_resume_finishes_it(tmp_path, uninterrupted, sig, said, code):
    marks = tmp_path / "marks"
    marks.mkdir()
    job = _start(tmp_path, marks, wait_for_stop_at=31)
    try:
        running = _at_step_30(job, marks)
        job.send_signal(sig)
        wait_for(lambda: any(f"interrupted ({said})" in e["message"] for e in sdk.events(running["id"]))
                 or job.poll() is not None, 300, "the controller to ask the attempt to save and stop")
        (marks / "go").touch()
        out, err = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == code, err[-3000:]
    assert f"spotfit resume {running['id']}" in err
    doc = json.loads(out)
    assert doc["state"] == "stopped" and doc["interrupted"] is True and doc["controller"] == "finished"
    [attempt] = doc["attempts"]
    assert attempt["state"] == "stopped" and attempt["end_step"] >= 30
    assert not _runtimes(doc["store"])  # nothing left training, or billing, unsupervised
    saved = [e for e in sdk.events(doc["id"]) if e["kind"] == "checkpoint"]
    assert saved and saved[-1]["data"]["step"] == attempt["end_step"]
    resumed = _resume(doc["id"])
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-3000:]
    done = json.loads(out)
    assert done["state"] == "completed"
    assert [a["state"] for a in done["attempts"]] == ["stopped", "completed"]
    assert done["attempts"][1]["start_step"] == attempt["end_step"]
    assert done["step"] == uninterrupted["step"] == 188
    assert done["weights_sha256"] == uninterrupted["weights_sha256"] is not None


def test_a_killed_controller_is_named_by_status_and_resume_picks_the_job_up(tmp_path, uninterrupted):
    marks = tmp_path / "marks"
    marks.mkdir()
    job = _start(tmp_path, marks)
    resumed = None
    try:
        running = _at_step_30(job, marks)
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=60)
        [runtime] = _runtimes(running["store"])  # the attempt goes on, unsupervised
        gone = sdk.status(running["id"])
        assert gone["controller"] == "gone" and gone["resume"] == f"spotfit resume {running['id']}", gone
        shown = subprocess.run(spotfit_cmd("status", running["id"]), capture_output=True, text=True,
                               env=os.environ.copy())
        assert f"controller: gone — run `spotfit resume {running['id']}`" in " ".join(shown.stdout.split())
        resumed = _resume(running["id"])
        wait_for(lambda: any(e["kind"] == "adopted" for e in sdk.events(running["id"])) or resumed.poll() is not None,
                 300, "`spotfit resume` to adopt the running attempt")
        assert sdk.status(running["id"])["resume"] is None
        (marks / "go").touch()
        out, err = resumed.communicate(timeout=600)
    finally:
        for proc in (job, resumed):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert resumed.returncode == 0, err[-3000:]
    done = json.loads(out)
    assert done["state"] == "completed"
    assert [a["state"] for a in done["attempts"]] == ["completed"]  # adopted, not relaunched
    assert not psutil.pid_exists(runtime) or psutil.Process(runtime).status() == psutil.STATUS_ZOMBIE
    assert done["step"] == uninterrupted["step"] == 188
    assert done["weights_sha256"] == uninterrupted["weights_sha256"] is not None
