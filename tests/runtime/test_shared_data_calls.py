"""A dataset two `fit` calls share resumes exactly when the notice lands in the second call (issue 48).

The first call is skipped on resume (its end state restored), but the dataset object the second
call reuses advanced with each of the first call's epochs: a `PyDataset` reshuffling its indices
in `on_epoch_end`, a `tf.data` pipeline reshuffled each iteration. spotfit now draws the skipped
call's epochs from it without training (fit_wrapper._advance_shared_data). Each script fits 2
epochs of 10 steps twice; the notice is at step 27, in the second call. Before, both ended with
other weights than `python train.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotfit import sdk
from tests.support.jobs import run_inline_job, run_plain_script

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).parent / "scripts"
SPEC = """name: shared-data
script: train.py
market: {trace: null}
checkpoint: {interval: {steps: 5}, keep: 2}
training: {seed: 0, deterministic: true}
"""


@pytest.mark.parametrize("script", ["shared_pydataset.py", "shared_tf_data.py"])
def test_a_second_fit_call_on_the_first_calls_dataset_resumes_exactly(tmp_path, script):
    text = (SCRIPTS / script).read_text()
    expected = run_plain_script(tmp_path / "plain", text)
    doc = run_inline_job(tmp_path, SPEC, text, "--preempt-at", "27:5")
    assert [(a["state"], a["start_step"]) for a in doc["attempts"]] == [("preempted", 0), ("completed", 27)]
    assert doc["state"] == "completed" and doc["step"] == 40
    assert json.loads((tmp_path / "job" / "out.json").read_text()) == expected
    [skipped] = [e for e in sdk.events(doc["id"]) if e["kind"] == "fit_skipped"]
    assert skipped["attempt"] == 2 and skipped["data"]["data_batches"] == 20  # the first call's 2 epochs of 10
