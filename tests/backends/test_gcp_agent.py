"""The gcp instance agent against a metadata server on 127.0.0.1: the 30 s notice becomes SIGTERM, then exit 75."""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request

import pytest

from spotfit.attempt.exit_codes import EXIT_PREEMPTED
from spotfit.backends.gcp import agent
from spotfit.stores import open_store
from tests.support.gce_metadata import MetadataServer
from tests.support.wait import wait_for

# Stands in for the runtime: says it is ready, then on SIGTERM "saves" and exits 75, as the runtime does.
RUNTIME = """
import pathlib, signal, sys, time
def saved(*_):
    pathlib.Path("saved").write_text("checkpoint")
    sys.exit(75)
signal.signal(signal.SIGTERM, saved)
pathlib.Path("ready").write_text("")
time.sleep(600)
"""


@pytest.fixture
def metadata():
    server = MetadataServer("spotfit-vm-w0", "us-central1-a", "10.128.0.2")
    yield server
    server.stop()


@pytest.fixture
def attempt(tmp_path):
    url = f"file://{tmp_path}/store/jobs/j1"
    workdir = tmp_path / "work"
    open_store(url).write_bytes("attempts/0001/launch.json", json.dumps(
        {"workdir": str(workdir), "code_key": None, "env": {}, "workers": 1}).encode())
    return url, workdir


def _run(url: str, metadata: MetadataServer, result: dict) -> threading.Thread:
    cmd = [sys.executable, "-c", RUNTIME]
    thread = threading.Thread(target=lambda: result.setdefault(
        "code", agent.run(url, 1, metadata.url, poll_s=0.1, runtime_cmd=cmd)), daemon=True)
    thread.start()
    return thread


def test_the_preemption_notice_becomes_sigterm_and_exit_75(metadata, attempt):
    url, workdir = attempt
    result: dict = {}
    thread = _run(url, metadata, result)
    wait_for(lambda: (workdir / "ready").exists(), 60, "the stand-in runtime to start")
    wait_for(lambda: metadata.requests[f"{agent.PREEMPTED}"] >= 2, 60, "the agent to long-poll instance/preempted")
    metadata.preempt()
    thread.join(timeout=60)
    assert result["code"] == EXIT_PREEMPTED == 75
    assert (workdir / "saved").read_text() == "checkpoint"
    assert metadata.refused == 0  # every request carried Metadata-Flavor: Google
    assert open_store(url).exists("logs/attempt-0001.log")  # the runtime's output, uploaded


def test_the_controllers_preempt_file_works_too(metadata, attempt):
    url, workdir = attempt
    result: dict = {}
    thread = _run(url, metadata, result)
    wait_for(lambda: (workdir / "ready").exists(), 60, "the stand-in runtime to start")
    open_store(url).write_bytes("attempts/0001/preempt.json", b'{"notice_s": 30}')
    thread.join(timeout=60)
    assert result["code"] == 75


def test_the_metadata_server_refuses_requests_without_the_header(metadata):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{metadata.url}{agent.PREEMPTED}", timeout=10)
    assert err.value.code == 403
    assert agent.Metadata(metadata.url).get(agent.PREEMPTED)[0] == "FALSE"
