"""The instance agent on loopback: code unpacked, TF_CONFIG per worker, notices forwarded.

IMDS is the IMDSv2-only emulator of tests/support/imds.py on 127.0.0.1 (reads without a session
token get 401), one per simulated worker; the "runtime" is a small Python child, so no TensorFlow
is imported.
"""

from __future__ import annotations

import json
import sys
import threading

import pytest

from spotfit.attempt.exit_codes import EXIT_PREEMPTED
from spotfit.backends.aws import agent
from spotfit.stores import open_store
from tests.support.aws_moto import aws_backend, launch_request
from tests.support.imds import ImdsServer
from tests.support.wait import wait_for


@pytest.fixture
def servers():
    """`servers(local_ip)`: an IMDSv2 server of one instance on 127.0.0.1 (tests/support/imds.py)."""
    started: list[ImdsServer] = []

    def start(local_ip: str) -> ImdsServer:
        started.append(ImdsServer("i-0123456789abcdef0", "us-west-2b", local_ip))
        return started[-1]

    yield start
    for server in started:
        server.stop()


# Stands in for `python -m spotfit.runtime`: reports TF_CONFIG and the code it sees, then waits
# for SIGTERM and exits "preempted with checkpoint", as the runtime does (and 3 if none comes).
FAKE_RUNTIME = """
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(75))
json.dump({"tf_config": os.environ.get("TF_CONFIG"), "flag": os.environ.get("MY_FLAG"),
           "code": sorted(os.listdir("."))}, open(sys.argv[1] + ".tmp", "w"))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
if sys.argv[2] == "wait":
    time.sleep(300)
    sys.exit(3)
"""


def test_each_worker_gets_tf_config_from_the_private_addresses(aws, job, tmp_path, servers):
    import shutil

    handle = aws_backend(aws).launch(launch_request(job, workers=2))
    cluster = json.loads(open_store(job).read_bytes("attempts/0001/cluster.json"))
    launch = json.loads(open_store(job).read_bytes("attempts/0001/launch.json"))
    seen = []
    for index, ip in enumerate(cluster["ips"]):
        shutil.rmtree(launch["workdir"])  # each instance starts without the code
        out = tmp_path / f"worker{index}.json"
        code = agent.run(job, 1, servers(ip).url, poll_s=0.05,
                         runtime_cmd=[sys.executable, "-c", FAKE_RUNTIME, str(out), "exit"])
        assert code == 0
        seen.append(json.loads(out.read_text()))
    assert len(handle.instances) == 2
    for index, doc in enumerate(seen):
        assert json.loads(doc["tf_config"]) == {"cluster": {"worker": cluster["worker"]},
                                                "task": {"type": "worker", "index": index}}
        assert doc["flag"] == "1" and doc["code"] == ["train.py"]
    assert cluster["worker"][0].endswith(":2222")
    assert open_store(job).exists("logs/attempt-0001.log")


@pytest.mark.parametrize("source", ["spot notice (IMDSv2)", "controller preempt"])
def test_a_notice_reaches_the_runtime_as_sigterm(aws, job, tmp_path, servers, source):
    backend = aws_backend(aws)
    handle = backend.launch(launch_request(job))
    imds = servers("10.0.0.5")
    out = tmp_path / "seen.json"
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("code", agent.run(
        job, 1, imds.url, poll_s=0.05, runtime_cmd=[sys.executable, "-c", FAKE_RUNTIME, str(out), "wait"])),
        daemon=True)
    worker.start()
    wait_for(lambda: out.exists() or not worker.is_alive(), 120, "the runtime to start under the agent")
    assert out.exists(), f"the agent ended before its runtime started: {result}"
    if source.startswith("spot"):
        imds.interrupt(notice_s=10.0)
    else:
        backend.preempt(handle, notice_s=10.0)
    wait_for(lambda: not worker.is_alive(), 120, f"the agent to end after the {source}")
    assert result["code"] == EXIT_PREEMPTED
    assert imds.requests["PUT /latest/api/token"] >= 1 and not any("no token" in p for p in imds.requests)
    backend.stop(handle, grace_s=0)  # also cancels the end-of-notice termination
