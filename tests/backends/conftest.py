"""Fixtures of the backend tests: moto in-process (`aws`) and a job prefix (`job`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from spotfit.attempt.config import RuntimeConfig
from spotfit.stores import open_store
from tests.support.aws_moto import REGION, Calls, MotoAws, PlacementGroups, moto_session


@pytest.fixture
def aws(monkeypatch) -> Iterator[MotoAws]:
    """moto in-process, with fake credentials in the environment (for clients spotfit makes)."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        session = moto_session()
        calls, groups = Calls(session), PlacementGroups(session)
        yield MotoAws(session, calls, groups, session.client("ec2"))


@pytest.fixture
def job(tmp_path) -> str:
    """A job prefix in a file:// store, with attempts 1 and 2's runtime.json as the controller writes it."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    (code / "__pycache__").mkdir()
    (code / "__pycache__" / "x.pyc").write_bytes(b"junk")
    url = f"file://{tmp_path}/store/jobs/job-1"
    store = open_store(url)
    for attempt in (1, 2):
        config = RuntimeConfig(job_id="job-1", job_url=url, script=str(code / "train.py"), workdir=str(code),
                               attempt=attempt)
        store.write_bytes(f"attempts/{attempt:04d}/runtime.json", config.to_json().encode())
    return url
