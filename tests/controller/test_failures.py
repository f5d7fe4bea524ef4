"""A script that fails is retried `max_failures` times, then the job fails with its error shown;
an attempt SIGKILLed without being asked (as the OOM killer does) counts as a failure too.

The attempts are hollow (spotfit/hollow/): each script's `hollow.json` does what the script does.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from spotfit.hollow import SCENARIO_FILE
from tests.support.jobs import spotfit_cmd

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("hollow")]


def test_user_code_failure_is_not_retried_forever(tmp_path):
    (tmp_path / "train.py").write_text("raise ValueError('bad learning rate schedule')\n")
    (tmp_path / SCENARIO_FILE).write_text(json.dumps({"fail_at_step": 0, "fail_error": "ValueError",
                                                      "fail_message": "bad learning rate schedule"}))
    (tmp_path / "spotfit.yaml").write_text(
        "name: broken\nscript: train.py\nmax_failures: 1\nfailure_backoff_s: 0.1\n"
        "market: {trace: aws-v100, zones: [us-west-2a], start: '2023-02-17T19:16:00', time_scale: 10}\n"
    )
    out = subprocess.run(spotfit_cmd("run", str(tmp_path / "spotfit.yaml"), "--json"), capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["state"] == "failed"
    assert [a["state"] for a in doc["attempts"]] == ["failed", "failed"]  # 1 try + 1 retry
    logs = json.loads(subprocess.run(spotfit_cmd("logs", doc["id"], "--json"), capture_output=True,
                                     text=True, env=os.environ.copy()).stdout)
    assert "ValueError: bad learning rate schedule" in logs["log"]
    assert any(e["kind"] == "failed" and "bad learning rate" in e["message"] for e in logs["events"])


def test_an_unasked_sigkill_counts_as_an_oom_failure(tmp_path):
    (tmp_path / "train.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    (tmp_path / SCENARIO_FILE).write_text(json.dumps({"kill_at_step": 0}))
    (tmp_path / "spotfit.yaml").write_text("name: oom\nscript: train.py\nmax_failures: 0\nmarket: {trace: null}\n")
    out = subprocess.run(spotfit_cmd("run", str(tmp_path / "spotfit.yaml"), "--json"), capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["state"] == "failed" and "max_failures=0" in doc["message"]
    assert [(a["state"], a["failure"]) for a in doc["attempts"]] == [("killed", "oom")]
