"""With an s3:// store, the local backend copies each attempt's log to the store when it ends.

The attempt is a hollow one (spotfit/hollow/): its scenario prints the line the test looks for.
"""

from __future__ import annotations

import json
import uuid

import pytest

from spotfit import sdk
from spotfit.hollow import SCENARIO_FILE
from spotfit.stores import open_store
from tests.support.jobs import run_inline_job
from tests.support.seaweed import BUCKET

SCRIPT = "print('hello from the attempt log')\n"
SCENARIO = {"epochs": 1, "steps_per_epoch": 5, "prints": ["hello from the attempt log"]}


@pytest.mark.slow
@pytest.mark.usefixtures("hollow")
def test_an_attempt_log_reaches_the_s3_store(s3_env, tmp_path, spotfit_home):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / SCENARIO_FILE).write_text(json.dumps(SCENARIO))  # beside the spec run_inline_job writes
    store = f"s3://{BUCKET}/logs-{uuid.uuid4().hex[:8]}"
    doc = run_inline_job(tmp_path, f"name: logs\nscript: train.py\nmarket: {{trace: null}}\n"
                                   f"checkpoint: {{store: '{store}'}}\n", SCRIPT)
    key = "logs/attempt-0001.log"
    assert "hello from the attempt log" in open_store(f"{store}/jobs/{doc['id']}").read_bytes(key).decode()
    local = spotfit_home / "logs" / doc["id"] / key
    local.unlink()  # what `spotfit logs` shows now can only come from the store
    assert "hello from the attempt log" in sdk.logs(doc["id"])["log"]
