"""With an s3:// store, the local backend copies each attempt's log to the store when it ends."""

from __future__ import annotations

import uuid

import pytest

from spotfit import sdk
from spotfit.stores import open_store
from tests.support.jobs import run_inline_job
from tests.support.seaweed import BUCKET

SCRIPT = "print('hello from the attempt log')\n"


@pytest.mark.slow
def test_an_attempt_log_reaches_the_s3_store(s3_env, tmp_path, spotfit_home):
    store = f"s3://{BUCKET}/logs-{uuid.uuid4().hex[:8]}"
    doc = run_inline_job(tmp_path, f"name: logs\nscript: train.py\nmarket: {{trace: null}}\n"
                                   f"checkpoint: {{store: '{store}'}}\n", SCRIPT)
    key = "logs/attempt-0001.log"
    assert "hello from the attempt log" in open_store(f"{store}/jobs/{doc['id']}").read_bytes(key).decode()
    local = spotfit_home / "logs" / doc["id"] / key
    local.unlink()  # what `spotfit logs` shows now can only come from the store
    assert "hello from the attempt log" in sdk.logs(doc["id"])["log"]
