"""Exact resume of the unmodified digits script under real SIGTERM and SIGKILL preemptions."""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest

from tests.support.job_report import report_also
from tests.support.jobs import spotfit_cmd, spotfit_home_at, write_spec

pytestmark = pytest.mark.slow

SPEC = """
name: digits
script: train.py
args: ["--epochs", "3", "--dataset", "{dataset}"]
market: {{trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 10}}
checkpoint: {{interval: {{steps: 10}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
"""
TOTAL = 141  # 47 steps x 3 epochs


def _run(tmp_path, name: str, dataset: str = "arrays", preempt_at: str | None = None,
         total: int = TOTAL) -> dict:
    spec = write_spec(tmp_path / name, SPEC.format(dataset=dataset))
    args = ["run", str(spec), "--json"] + (["--preempt-at", preempt_at] if preempt_at else [])
    out = subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=600,
                         stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "completed" and doc["step"] == total
    return doc


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, request) -> dict:
    home = tmp_path_factory.mktemp("baseline-home")
    report_also(request, home)
    with spotfit_home_at(home):
        return {ds: _run(tmp_path_factory.mktemp(ds), "job", ds) for ds in ("arrays", "tfdata")}


def test_three_sigterm_preemptions_end_with_the_same_weights(tmp_path, baseline):
    steps = sorted(random.Random(2026).sample(range(2, TOTAL), 3))
    doc = _run(tmp_path, "preempted", preempt_at=",".join(f"{s}:5" for s in steps))
    assert doc["weights_sha256"] == baseline["arrays"]["weights_sha256"], f"preempted at {steps}"
    attempts = doc["attempts"]
    assert [a["state"] for a in attempts] == ["preempted"] * 3 + ["completed"]
    assert [a["end_step"] for a in attempts[:3]] == steps
    # With a notice nothing is redone: each attempt starts where the previous one stopped.
    assert [a["start_step"] for a in attempts[1:]] == steps


def test_sigkill_resumes_from_the_last_periodic_checkpoint(tmp_path, baseline):
    doc = _run(tmp_path, "killed", preempt_at="57:0")
    assert doc["weights_sha256"] == baseline["arrays"]["weights_sha256"]
    first, second = doc["attempts"][:2]
    assert first["state"] == "killed" and first["end_step"] == 57
    redone = first["end_step"] - second["start_step"]
    assert second["start_step"] == 50 and 0 <= redone <= 10  # at most one interval ({steps: 10})


def test_reshuffling_tf_data_pipeline_resumes_in_the_same_order(tmp_path, baseline):
    doc = _run(tmp_path, "tfdata", dataset="tfdata", preempt_at="30:5,100:5")
    assert doc["weights_sha256"] == baseline["tfdata"]["weights_sha256"]
    assert len(doc["attempts"]) == 3


def test_repeated_pipeline_with_steps_per_epoch_resumes_exactly(tmp_path):
    # 40 steps per epoch over 47 batches per pass: epochs and passes do not line up.
    base = _run(tmp_path, "repeat-base", dataset="tfdata-repeat", total=120)
    doc = _run(tmp_path, "repeat", dataset="tfdata-repeat", preempt_at="45:5,101:0", total=120)
    assert doc["weights_sha256"] == base["weights_sha256"]
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "killed", "completed"]
