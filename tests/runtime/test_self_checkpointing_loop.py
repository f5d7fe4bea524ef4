"""A GradientTape loop that checkpoints itself resumes exactly, and never reads `completed` wrong (issue 48).

The script (tests/runtime/scripts/self_checkpointing_loop.py) saves a `tf.train.CheckpointManager`
checkpoint into ./tf_ckpt at each epoch's end (22 steps an epoch, 66 in all) and restores it at
its start. On the local backend the next attempt runs in the same folder, so it starts its loop
past step 0. Before, spotfit counted from 0 and replayed to its own checkpoint's step: after a
notice at 31 the job read `completed` at step 44, an epoch lost.

One job meets both cases: a notice at step 31 (spotfit's checkpoint 31, the script's 22: spotfit
replays 23..31 and restores its own), then a SIGKILL at step 47 (the script's checkpoint, 44, is
newer than spotfit's last: spotfit keeps the script's state and counts on). The job must end at
the script's 66 steps with the weights of `python train.py` (op determinism on in both).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotfit import sdk
from tests.support.jobs import run_inline_job, run_plain_script

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "self_checkpointing_loop.py"
SPEC = """name: self-ckpt
script: train.py
market: {trace: null}
checkpoint: {interval: {steps: 20}, keep: 2}
training: {seed: 0, deterministic: true, mixed_precision: "off"}
"""


def test_a_loop_that_restores_its_own_checkpoint_resumes_exactly_through_a_notice_and_a_sigkill(tmp_path):
    expected = run_plain_script(tmp_path / "plain", SCRIPT.read_text())
    assert expected["iterations"] == 66

    doc = run_inline_job(tmp_path, SPEC, SCRIPT.read_text(), "--preempt-at", "31:5,47:0")
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "killed", "completed"], doc["attempts"]
    assert doc["state"] == "completed" and doc["step"] == 66, doc
    assert json.loads((tmp_path / "job" / "out.json").read_text()) == expected  # the script's own count and weights
    events = sdk.events(doc["id"])
    own = [(e["attempt"], e["data"]["own_iterations"]) for e in events if e["kind"] == "script_resumed_itself"]
    assert own == [(2, 22), (3, 44)], own
    assert [(e["attempt"], e["data"]["steps"]) for e in events if e["kind"] == "replaying"] == [(2, 31 - 22)]
    assert [a["start_step"] for a in doc["attempts"]][1:] == [31, 44]
