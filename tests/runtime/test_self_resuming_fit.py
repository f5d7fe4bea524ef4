"""A `fit` script that resumes itself resumes exactly under spotfit too (issue 48, item 0).

The script (tests/runtime/scripts/self_resuming_fit.py) saves its weights with `ModelCheckpoint`
and its epoch count at each epoch's end, and at its start loads them and passes `initial_epoch`:
the next local attempt, in the same folder, starts where the script's own files say. One job
meets two cases: a notice at step 27 (spotfit's checkpoint, 27, is newer than the script's, 20),
then a SIGKILL at step 33 (the script's, epoch 3 = step 30, is newer than spotfit's 27). The job
must end at 40 steps with the weights of `python train.py` (op determinism on in both).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.jobs import run_inline_job, run_plain_script

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "self_resuming_fit.py"
SPEC = """name: self-fit
script: train.py
market: {trace: null}
checkpoint: {interval: {steps: 25}, keep: 2}
training: {seed: 0, deterministic: true}
"""


def test_a_fit_that_loads_its_own_checkpoint_resumes_exactly_through_a_notice_and_a_sigkill(tmp_path):
    expected = run_plain_script(tmp_path / "plain", SCRIPT.read_text())
    assert expected["iterations"] == 40

    doc = run_inline_job(tmp_path, SPEC, SCRIPT.read_text(), "--preempt-at", "27:5,33:0")
    assert [a["state"] for a in doc["attempts"]] == ["preempted", "killed", "completed"], doc["attempts"]
    assert doc["state"] == "completed" and doc["step"] == 40, doc
    assert json.loads((tmp_path / "job" / "out.json").read_text()) == expected
