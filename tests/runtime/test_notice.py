"""The spot interruption endpoint (AWS IMDS layout) served on loopback, polled by the runtime."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spotfit.attempt.config import RuntimeConfig
from spotfit.attempt.exit_codes import EXIT_PREEMPTED
from spotfit.errors import NotFoundError
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.stores import open_store
from tests.support.jobs import DIGITS
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


class _Imds(BaseHTTPRequestHandler):
    interrupted = threading.Event()

    def do_GET(self):
        if self.path == "/latest/meta-data/spot/instance-action" and self.interrupted.is_set():
            body = json.dumps({"action": "terminate", "time": "2026-11-30T10:00:00Z"}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def imds():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Imds)
    _Imds.interrupted.clear()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_interruption_notice_from_the_endpoint_saves_and_exits_preempted(tmp_path, imds):
    url = f"file://{tmp_path}/job"
    store = open_store(url)
    config = RuntimeConfig(
        job_id="j", job_url=url, script=str(DIGITS / "train.py"), workdir=str(DIGITS),
        args=["--epochs", "200"], interval_steps=100000, heartbeat_s=0.1,
        metadata_url=f"http://127.0.0.1:{imds.server_address[1]}/latest/meta-data/spot/instance-action",
        metadata_poll_s=0.2,
    )
    store.write_bytes("attempts/0001/runtime.json", config.to_json().encode())
    proc = subprocess.Popen([sys.executable, "-m", "spotfit.runtime", url, "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def step() -> int:
        try:
            return json.loads(store.read_bytes("progress.json")).get("step") or 0
        except (NotFoundError, ValueError):  # not written yet, or caught mid-write
            return 0

    try:
        wait_for(lambda: step() >= 30 or proc.poll() is not None, 300, "training to reach step 30")
        assert proc.poll() is None, f"the runtime exited with {proc.returncode} before step 30"
        seen = step()
        _Imds.interrupted.set()
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == EXIT_PREEMPTED
    progress = json.loads(store.read_bytes("progress.json"))
    saved = CheckpointStore(store).steps()
    assert saved and saved[-1] == progress["step"] >= seen  # saved where the notice stopped it
    exits = [json.loads(store.read_bytes(k)) for k in store.list("events")]
    assert any(e["kind"] == "exit" and "metadata" in e["message"] for e in exits)
