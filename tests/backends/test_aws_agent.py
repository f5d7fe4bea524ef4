"""The instance agent on loopback: code unpacked, TF_CONFIG per worker, notices forwarded.

IMDS is an IMDSv2-only server on 127.0.0.1 (reads without a session token get 401), one per
simulated worker; the "runtime" is a small Python child, so no TensorFlow is imported.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spotfit.backends.aws import agent
from spotfit.runtime import EXIT_PREEMPTED
from spotfit.stores import open_store
from tests.support.aws_moto import aws_backend, launch_request
from tests.support.wait import wait_for

TOKEN = "imds-token"


def _imds(local_ip: str, interrupted: threading.Event):
    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self):
            ok = self.path == "/latest/api/token" and "X-aws-ec2-metadata-token-ttl-seconds" in self.headers
            self.send_response(200 if ok else 400)
            self.end_headers()
            self.wfile.write(TOKEN.encode() if ok else b"")

        def do_GET(self):
            if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                self.send_response(401)
                self.end_headers()
                return
            body = {agent.LOCAL_IP_PATH: local_ip}.get(self.path)
            if self.path == agent.NOTICE_PATH and interrupted.is_set():
                body = json.dumps({"action": "terminate", "time": "2026-11-30T10:00:00Z"})
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write((body or "").encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def servers():
    started = []

    def start(local_ip: str, interrupted: threading.Event | None = None) -> str:
        server, url = _imds(local_ip, interrupted or threading.Event())
        started.append(server)
        return url

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


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
        code = agent.run(job, 1, servers(ip), poll_s=0.05,
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
    interrupted = threading.Event()
    url = servers("10.0.0.5", interrupted)
    out = tmp_path / "seen.json"
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("code", agent.run(
        job, 1, url, poll_s=0.05, runtime_cmd=[sys.executable, "-c", FAKE_RUNTIME, str(out), "wait"])),
        daemon=True)
    worker.start()
    wait_for(lambda: out.exists() or not worker.is_alive(), 120, "the runtime to start under the agent")
    assert out.exists(), f"the agent ended before its runtime started: {result}"
    if source.startswith("spot"):
        interrupted.set()
    else:
        backend.preempt(handle, notice_s=10.0)
    wait_for(lambda: not worker.is_alive(), 120, f"the agent to end after the {source}")
    assert result["code"] == EXIT_PREEMPTED
    backend.stop(handle, grace_s=0)  # also cancels the end-of-notice termination
