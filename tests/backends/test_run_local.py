"""End to end on the local backend: real worker processes, real signals; hollow attempts (spotfit/hollow/).

The jobs' attempts are the real runtime around the hollow trainer: the digits script's shape
(47 steps an epoch), a final `weights_sha256` that must be the uninterrupted hollow run's, and
no TensorFlow. The detached job stands still at a step until the cancel's notice reaches it.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.hollow_jobs import reference, write_hollow_spec
from tests.support.jobs import DIGITS, spotfit_cmd
from tests.support.wait import wait_for
from tests.support.webhook import webhook_receiver

# us-west-2a has spot for 400 ticks (21 trace hours) from this start: no market preemptions.
CALM = """
name: {name}
script: train.py
args: ["--epochs", "{epochs}"]
market: {{trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 10}}
checkpoint: {{interval: {{steps: 20}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
"""

STARTED = "longrun: training digits for 400 epochs"


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


def _status(job_id: str) -> dict:
    out = _run("status", job_id, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow
@pytest.mark.usefixtures("hollow")
def test_run_trains_to_completion_and_reports(tmp_path, spotfit_home):
    spec = write_hollow_spec(tmp_path / "job", CALM.format(name="digits", epochs=2))
    spotfit_home.mkdir(mode=0o700, exist_ok=True)
    with webhook_receiver() as (url, received):  # the settings file's sink hears the job complete
        (spotfit_home / "config.yaml").write_text(json.dumps({"notify": {"sinks": [{"webhook": url}]}}))
        out = _run("run", str(spec), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [(n["event"], n["job"], n["cost_usd"]) for n in received] == [("completed", doc["id"], doc["cost_usd"])]
    spend = json.loads(_run("cost", "--all", "--json").stdout)["totals"]
    assert spend["jobs"] == 1 and spend["spent_usd"] == pytest.approx(doc["cost_usd"])
    assert doc["state"] == "completed"
    assert doc["step"] == doc["total_steps"] == 94  # 1500 samples / 32 = 47 steps x 2 epochs
    assert len(doc["weights_sha256"]) == 64
    assert doc["weights_sha256"] == reference(DIGITS / "train.py", ["--epochs", "2"])["weights_sha256"]
    assert doc["metrics"]["val_accuracy"] > 0.5
    assert [a["state"] for a in doc["attempts"]] == ["completed"]
    assert doc["cost_usd"] > 0
    for key in ("id", "name", "state", "step", "total_steps", "attempts", "cost_usd", "weights_sha256"):
        assert key in doc
    listed = json.loads(_run("list", "--json").stdout)
    assert [j["id"] for j in listed] == [doc["id"]]


@pytest.mark.slow
@pytest.mark.usefixtures("hollow")
def test_detach_status_logs_cancel_from_separate_shells(tmp_path):
    # The attempt stands still at step 60 until a notice (the cancel's, as the backend sends it):
    # the cancel lands mid-training whatever the machine's speed.
    spec = write_hollow_spec(tmp_path / "job", CALM.format(name="longrun", epochs=400), wait_for_notice_at=[60],
                             prints=[STARTED])
    out = _run("run", str(spec), "--detach", "--json")
    assert out.returncode == 0, out.stderr
    job_id = json.loads(out.stdout)["id"]

    doc = wait_for(lambda: (d := _status(job_id))["step"] >= 50 and d, 300, "the detached job to reach step 50")
    assert doc["state"] == "running", doc
    assert doc["controller"] == "alive"

    logs = json.loads(_run("logs", job_id, "--json").stdout)
    assert logs["attempt"] == 1
    assert STARTED in logs["log"]  # the script's own output
    assert any(e["kind"] == "launch" for e in logs["events"])

    out = _run("cancel", job_id, "--json")
    assert out.returncode == 0, out.stderr
    doc = wait_for(lambda: (d := _status(job_id))["state"] == "cancelled" and d, 300, "the job to be cancelled")
    assert doc["state"] == "cancelled"
    assert doc["attempts"][-1]["state"] == "stopped"
    assert doc["step"] < doc["total_steps"]
    # The stop saved a checkpoint at the step it reached: nothing was lost.
    events = json.loads(_run("logs", job_id, "--json").stdout)["events"]
    saves = [e for e in events if e["kind"] == "checkpoint"]
    assert saves and saves[-1]["data"]["step"] == doc["attempts"][-1]["end_step"]


def test_run_rejects_a_bad_spec_with_one_line(job_spec):
    spec = job_spec("name: x\nscript: train.py\nresourcs: {count: 1}\n")
    out = _run("run", str(spec))
    assert out.returncode == 2
    assert "did you mean `resources`" in out.stderr
    assert "Traceback" not in out.stderr


def test_status_of_unknown_job_is_a_clear_error():
    out = _run("status", "no-such-job")
    assert out.returncode == 2
    assert "No job matches 'no-such-job'" in out.stderr
