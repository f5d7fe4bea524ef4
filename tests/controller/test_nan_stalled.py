"""The `nan_loss` and `stalled` rules on training processes, end to end through `spotfit run`.

- nan_loss: a script whose loss becomes NaN at a known step; the job ends `stopped` at that
  very step (the runtime waits at its first NaN step for the rule's verdict), the rule's event
  and webhook name the step, and the NaN weights are not checkpointed.
- stalled: a script whose input pipeline hangs after a known step; the rule fires at that step
  and the hung process, which cannot read a stop request, is ended.

The jobs run hollow attempts (spotfit/hollow/: the scripts' shapes and flags, no TensorFlow).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest

from spotfit import sdk
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.stores import open_store
from tests.support.hollow_jobs import write_scenario
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
SCRIPTS = Path(__file__).parent / "scripts"
# A replayed market with spot up for hours from this start; 60× makes a market notice (SIGTERM
# to SIGKILL) the 3 s minimum.
CALM_MARKET = 'market: {trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 60}'
RUN_TIMEOUT_S = 300


def _write_job(folder: Path, script: str, spec_text: str, **scenario) -> Path:
    """Copy `script` beside a spec, with its hollow scenario (`scenario`: overrides); the spec's path."""
    folder.mkdir(parents=True)
    shutil.copy(SCRIPTS / script, folder / script)
    write_scenario(folder, SCRIPTS / script, **scenario)
    (folder / "spotfit.yaml").write_text(spec_text)
    return folder / "spotfit.yaml"


def _run_job(folder: Path, script: str, spec_text: str) -> dict:
    """`spotfit run --json` the job of `script` and `spec_text`; the job's status document."""
    return _stopped(_spotfit("run", str(_write_job(folder, script, spec_text))))


def _stopped(doc: dict) -> dict:
    assert doc["state"] == "stopped", f"the job ended {doc['state']!r}: {doc.get('message')}"
    return doc


def _spotfit(*args: str) -> dict:
    run = subprocess.Popen(_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL, env=os.environ.copy())
    return _output(run, *args)


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "spotfit", *args, "--json"]


def _output(run: subprocess.Popen, *args: str) -> dict:
    """The JSON document `spotfit ARGS --json` printed, once it ended."""
    try:
        out, err = run.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        run.kill()
        run.communicate()
        pytest.fail(f"`spotfit {' '.join(args)}` did not end within {RUN_TIMEOUT_S} s (waiting for the job to stop)")
    assert run.returncode in (0, 1), err[-3000:]
    return json.loads(out)


def _events(job_id: str) -> list[dict]:
    return _spotfit("logs", job_id)["events"]


def _job_folder(doc: dict) -> Path:
    return Path(doc["store"][len("file://"):])


def _is_runtime(pid: int) -> bool:
    """Whether `pid` is (still) a spotfit runtime process."""
    try:
        return "spotfit.runtime" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


@pytest.mark.usefixtures("hollow")
def test_nan_loss_stops_the_job_at_the_nan_step_and_keeps_the_good_checkpoint(tmp_path, webhook):
    url, received = webhook
    nan_step = 25  # checkpoints every 10 steps: 10 and 20 are good, 30 would hold NaN weights
    doc = _run_job(tmp_path / "nan", "nan_train.py",
                   f"name: nan\nscript: nan_train.py\nargs: [--nan-step, '{nan_step}']\n{CALM_MARKET}\n"
                   "checkpoint: {interval: {steps: 10}, keep: 2}\ntraining: {seed: 0, deterministic: true}\n"
                   f"rules: [{{rule: nan_loss, action: stop}}]\nnotify: {{webhook: '{url}'}}\n")
    # Training stood still at the first NaN step until the stop came: not one step more.
    assert doc["step"] == nan_step < doc["total_steps"]
    assert [(a["state"], a["end_step"]) for a in doc["attempts"]] == [("stopped", nan_step)]
    events = _events(doc["id"])
    rules = [e for e in events if e["kind"] == "rule"]
    assert [(e["data"]["rule"], e["data"]["action"]) for e in rules] == [("nan_loss", "stop")]
    assert f"at step {nan_step}" in rules[0]["message"] and f"at step {nan_step}" in doc["message"]
    assert [e["data"]["step"] for e in events if e["kind"] == "nan_loss"] == [nan_step]
    assert [(p["rule"], p["action"]) for p in received] == [("nan_loss", "stop")]
    assert f"at step {nan_step}" in received[0]["text"]
    # The stop's save of NaN weights was refused: `spotfit resume` starts from step 20, not from NaN.
    assert [e["data"]["step"] for e in events if e["kind"] == "checkpoint_skipped"] == [nan_step]
    latest = CheckpointStore(open_store(doc["store"])).load_latest()
    assert latest.step == 20 and all(np.isfinite(a).all() for a in latest.arrays.values())


@pytest.mark.usefixtures("hollow")
def test_stalled_input_pipeline_trips_the_rule_and_the_hung_process_is_ended(tmp_path):
    steps = 8
    never = tmp_path / "data-that-never-arrives"
    # The stall clock runs from the first step the controller saw the attempt make, and hollow steps
    # take no time: the script stands at step 2 (its progress: step 1, training) until the controller
    # has looked at it, then makes its steps and hangs.
    pause = tmp_path / "pause"
    pause.mkdir()
    spec = _write_job(tmp_path / "stall", "stall_train.py",
                      f"name: stall\nscript: stall_train.py\nargs: [--steps, '{steps}', --wait-for, '{never}']\n"
                      f"{CALM_MARKET}\ntraining: {{seed: 0}}\n"
                      "rules: [{rule: stalled, for_s: 5, action: stop}]\n", pause_at=2, pause_dir=str(pause))
    run = subprocess.Popen(_cmd("run", str(spec)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           stdin=subprocess.DEVNULL, env=os.environ.copy())
    try:
        _looked_at_step_1(pause)
    except BaseException:
        run.kill()
        run.communicate()
        raise
    (pause / "go").touch()
    doc = _stopped(_output(run, "run", str(spec)))
    rules = [e for e in _events(doc["id"]) if e["kind"] == "rule"]
    assert [(e["data"]["rule"], e["data"]["action"]) for e in rules] == [("stalled", "stop")]
    # Why: no step after the last batch the pipeline delivered (not start-up, not an earlier step).
    assert f"after step {steps}" in rules[0]["message"], rules[0]["message"]
    assert doc["step"] == steps and [(a["state"], a["end_step"]) for a in doc["attempts"]] == [("stopped", steps)]
    progress = json.loads((_job_folder(doc) / "progress.json").read_text())
    assert progress["phase"] == "training" and progress["step"] == steps  # it hung; it never stopped by itself
    assert not _is_runtime(progress["pid"]), f"the hung runtime (pid {progress['pid']}) is still running"
    assert not never.exists()


def _looked_at_step_1(pause: Path) -> None:
    """Once the attempt stands at step 1: wait for a controller pass that began after the job's row said so."""
    wait_for(lambda: (pause / "paused").exists(), RUN_TIMEOUT_S, "the attempt to stand at step 2")
    job = wait_for(lambda: [j for j in sdk.db().list_jobs(1) if j["step"] == 1], RUN_TIMEOUT_S,
                   "the controller to read step 1")[0]
    wait_for(lambda: sdk.db().get_job(job["id"])["controller_seen_at"] > job["controller_seen_at"], RUN_TIMEOUT_S,
             "the controller's next pass")
