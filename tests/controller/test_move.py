"""A job moves: `spotfit resume JOB --accelerator CPU --count 2` goes on from its checkpoint on 2 replicas.

The end-to-end test trains the digits job on one CPU device, stops it with Ctrl-C at step 30 (the
script holds there until the test has sent the signal: where it stops does not depend on the
machine's speed), then resumes it with `--count 2`: the local backend splits the CPU into 2
logical devices, MirroredStrategy trains 2 replicas. The step goes on from the checkpoint, no step
is trained twice, the run ends at the step an unmoved run ends at (the global batch is the
script's), and the ledger shows both parts. The other tests check the refusals and the rewrite
without training.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from spotfit import sdk
from spotfit.errors import UsageError
from spotfit.sdk.move import Move, move
from spotfit.state.states import AttemptState
from tests.support.jobs import spotfit_cmd
from tests.support.store_faults import digits_script
from tests.support.wait import wait_for

SCRIPT = digits_script('''
import os, time
from pathlib import Path
import keras


class Hold(keras.callbacks.Callback):
    """Step 30 of the first attempt: say so, and wait for the test's go-on."""
    step = 0
    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        marks = Path(os.environ["HOLD_MARKS"])
        if self.step == 30 and not (marks / "go-on").exists():
            (marks / "at-30").touch()
            deadline = time.monotonic() + 600
            while not (marks / "go-on").exists():
                if time.monotonic() > deadline:
                    raise SystemExit("timed out waiting for the test's go-on")
                time.sleep(0.02)
''', "Hold")

SPEC = """name: {name}
script: train.py
resources: {{accelerator: CPU, count: 1}}
market: {{trace: aws-v100, zones: [us-west-2a], start: '2023-02-17T19:16:00', time_scale: 10}}
checkpoint: {{interval: {{steps: 10}}, keep: 2}}
training: {{seed: 7, deterministic: true}}
env: {{HOLD_MARKS: "{marks}"}}
"""


def _job(job_spec, tmp_path, name: str = "mover"):
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "train.py").write_text(SCRIPT)
    return job_spec(SPEC.format(name=name, marks=marks), name, script=tmp_path / "src" / "train.py"), marks


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


@pytest.mark.slow
def test_a_job_stopped_on_one_device_goes_on_from_its_step_on_two(job_spec, tmp_path):
    spec, marks = _job(job_spec, tmp_path)
    job = subprocess.Popen(spotfit_cmd("run", str(spec), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, stdin=subprocess.DEVNULL, env=os.environ.copy(), start_new_session=True)
    try:
        wait_for(lambda: (marks / "at-30").exists() or job.poll() is not None, 300, "the training to reach step 30")
        assert job.poll() is None, job.communicate()[1][-3000:]
        job.send_signal(signal.SIGINT)
        wait_for(lambda: any("interrupted (Ctrl-C)" in e["message"] for e in sdk.events("mover"))
                 or job.poll() is not None, 300, "the controller to ask the attempt to save and stop")
        (marks / "go-on").touch()
        out, err = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 130, err[-3000:]
    stopped = json.loads(out)
    [first] = stopped["attempts"]
    assert stopped["state"] == "stopped" and first["end_step"] >= 30

    resumed = _cli("resume", stopped["id"], "--accelerator", "CPU", "--count", "2", "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    done = json.loads(resumed.stdout)
    assert done["state"] == "completed" and done["id"] == stopped["id"]
    assert [a["state"] for a in done["attempts"]] == ["stopped", "completed"]
    assert done["attempts"][1]["start_step"] == first["end_step"]  # the step goes on from the checkpoint
    assert done["step"] == 188  # 4 epochs of ceil(1500 / 32) steps: the global batch is the script's 32

    events = sdk.events(stopped["id"])
    replicas = {e["attempt"]: e["data"]["replicas"] for e in events if e["kind"] == "strategy"}
    assert replicas == {1: 1, 2: 2}
    [moved] = [e for e in events if e["kind"] == "moved"]
    assert moved["data"]["from"] == "CPU×1 on local in us-west-2a"
    assert moved["data"]["to"] == "CPU×2 on local in us-west-2a"

    ledger = json.loads(_cli("cost", stopped["id"], "--json").stdout)
    assert [r["runs_on"] for r in ledger["rows"]] == ["CPU×1 on local in us-west-2a", "CPU×2 on local in us-west-2a"]
    assert [(r["start_step"], r["end_step"]) for r in ledger["rows"]] == [(0, first["end_step"]),
                                                                         (first["end_step"], 188)]
    assert ledger["totals"]["steps_redone"] == 0  # nothing is trained twice
    shown = " ".join(_cli("cost", stopped["id"]).stdout.split())
    assert "runs on" in shown and "CPU×2 on local" in shown


def _submitted(job_spec, tmp_path, name: str = "mover") -> dict:
    spec, _ = _job(job_spec, tmp_path, name)
    return sdk.db().get_job(sdk.submit(str(spec)))


def test_a_move_rewrites_the_spec_in_the_state_and_the_store(job_spec, tmp_path):
    job = _submitted(job_spec, tmp_path)
    assert move(sdk.db(), job, Move(accelerator="CPU", count=4, zone="us-west-2b")) == {
        "from": "CPU×1 on local in us-west-2a", "to": "CPU×4 on local in us-west-2b"}
    spec = json.loads(sdk.db().get_job(job["id"])["spec_json"])
    assert spec["resources"]["count"] == 4 and spec["market"]["zones"] == ["us-west-2b"]
    assert spec["base_dir"] == str(tmp_path / "mover")  # the script is found where it was
    stored = json.loads((_store_path(job["store_url"]) / "spec.json").read_text())
    assert stored["resources"]["count"] == 4
    [event] = [e for e in sdk.events(job["id"]) if e["kind"] == "moved"]
    assert "to CPU×4 on local in us-west-2b" in event["message"]


def test_a_move_under_a_new_spec_keeps_the_name_and_store(job_spec, tmp_path):
    job = _submitted(job_spec, tmp_path)
    other = tmp_path / "bigger"
    other.mkdir()
    (other / "train.py").write_text(SCRIPT)
    text = (tmp_path / "mover" / "spotfit.yaml").read_text()
    (other / "new.yaml").write_text(text.replace("count: 1", "count: 2"))
    assert move(sdk.db(), job, Move(spec_path=str(other / "new.yaml")))["to"] == "CPU×2 on local in us-west-2a"
    assert json.loads(sdk.db().get_job(job["id"])["spec_json"])["base_dir"] == str(other)

    (other / "renamed.yaml").write_text(text.replace("name: mover", "name: another"))
    with pytest.raises(UsageError, match=r"its `name` is 'another', job .*'s is 'mover'"):
        move(sdk.db(), job, Move(spec_path=str(other / "renamed.yaml")))


def test_bad_moves_are_refused_with_nothing_written(job_spec, tmp_path):
    job = _submitted(job_spec, tmp_path)
    before = sdk.db().get_job(job["id"])["spec_json"]
    out = _cli("resume", job["id"], "--count", "0")
    assert out.returncode == 2 and "resources.count" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 2
    out = _cli("resume", job["id"], "--zone", "mars-1a")
    assert out.returncode == 2 and "mars-1a" in out.stderr, out.stderr
    out = _cli("resume", job["id"], "--backend", "nimbus")
    assert out.returncode == 2 and "nimbus" in out.stderr, out.stderr

    number = sdk.db().add_attempt(job["id"], backend="local", zone="us-west-2a", market="spot",
                                  state=AttemptState.RUNNING, trace_start_s=0.0, start_step=0, info={})
    with pytest.raises(UsageError, match=f"its attempt {number} may still be running"):
        move(sdk.db(), job, Move(count=2))
    assert sdk.db().get_job(job["id"])["spec_json"] == before
    assert not [e for e in sdk.events(job["id"]) if e["kind"] == "moved"]


def _store_path(url: str):
    from pathlib import Path

    return Path(url[len("file://"):])
