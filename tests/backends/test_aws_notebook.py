"""A notebook attempt on the AWS backend (moto) under the real instance agent: a spot notice saves its files.

The "instance" is this machine: the agent runs the real runtime, which starts a real JupyterLab
on 127.0.0.1; IMDSv2 is a loopback server of the test's own (tests/backends/test_aws_agent.py).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from spotfit.attempt.config import RuntimeConfig
from spotfit.attempt.exit_codes import EXIT_PREEMPTED
from spotfit.attempt.layout import NOTEBOOK_SERVER as SERVER_KEY
from spotfit.attempt.notebook import TOKEN_ENV
from spotfit.backends.aws import agent
from spotfit.stores import open_store
from tests.backends.test_aws_agent import servers  # noqa: F401 — the IMDS fixture
from tests.interactive.jupyter import request
from tests.support.aws_moto import aws_backend, launch_request
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def test_a_spot_notice_saves_the_notebook_and_nothing_is_open_to_the_world(aws, tmp_path, servers,  # noqa: F811
                                                                          monkeypatch):
    folder = tmp_path / "spec"
    folder.mkdir()
    url = f"file://{tmp_path}/store/jobs/job-1"
    store = open_store(url)
    monkeypatch.setenv(TOKEN_ENV, "the-token")  # what the agent puts into the environment from SSM
    store.write_bytes("attempts/0001/runtime.json", RuntimeConfig(
        job_id="job-1", job_url=url, script="", workdir=str(folder), attempt=1, kind="notebook",
        notebook_sync_s=3600).to_json().encode())
    backend = aws_backend(aws)
    handle = backend.launch(launch_request(url))
    ec2: Any = aws.ec2
    (group,) = ec2.describe_security_groups(GroupIds=[handle.security_group])["SecurityGroups"]
    assert all(r["CidrIp"] not in ("0.0.0.0/0",) for p in group["IpPermissions"] for r in p.get("IpRanges", []))
    (reservation,) = ec2.describe_instances(InstanceIds=list(handle.instances))["Reservations"]
    assert reservation["Instances"][0]["MetadataOptions"]["HttpTokens"] == "required"

    imds = servers("10.0.0.5")
    result: dict = {}
    worker = threading.Thread(target=lambda: result.setdefault("code", agent.run(url, 1, imds.url, poll_s=0.1)),
                              daemon=True)
    worker.start()
    try:
        wait_for(lambda: store.exists(SERVER_KEY) or not worker.is_alive(), 240, "JupyterLab under the agent")
        port = json.loads(store.read_bytes(SERVER_KEY))["port"]
        assert request(port, "/api/contents", None)[0] == 403
        status, _ = request(port, "/api/contents/results.txt", "the-token", "PUT",
                            {"type": "file", "format": "text", "content": "kept through the notice"})
        assert status in (200, 201)
    finally:
        imds.interrupt(notice_s=30.0)  # the spot interruption notice (IMDSv2 spot/instance-action)
        wait_for(lambda: not worker.is_alive(), 120, "the agent to end after the spot notice")
        backend.stop(handle, grace_s=0)
    assert result["code"] == EXIT_PREEMPTED
    assert store.read_bytes("notebook/files/results.txt") == b"kept through the notice"
