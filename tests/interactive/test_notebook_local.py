"""`spotfit notebook --backend local` end to end: a real JupyterLab, its token, its files through a
preemption and a cancel, and the idle rule."""

from __future__ import annotations

import http.server
import json
import signal
import socket
import stat
import subprocess
import threading
from pathlib import Path

import psutil
import pytest

from spotfit import interactive, sdk
from spotfit.backends.local_process import LocalHandle
from spotfit.state.states import AttemptState
from spotfit.stores import open_store
from tests.interactive.jupyter import request, run_cell
from tests.support.jobs import spotfit_cmd
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

START_S = 240.0  # JupyterLab's start on a busy 2-core box


def _spec(folder: Path, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "notebook.yaml"
    path.write_text("name: nb\nkind: notebook\nmarket: {trace: null}\nnotebook: {sync_s: 3600}\n" + extra)
    return path


def _start(spec: Path) -> dict:
    out = subprocess.run(spotfit_cmd("notebook", str(spec), "--backend", "local", "--detach", "--json",
                                     "--wait-s", str(START_S)),
                         capture_output=True, text=True, timeout=START_S + 60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.fixture
def jobs():
    """The notebook jobs a test started; afterwards each is cancelled and any process left is killed by pid."""
    started: list[str] = []
    yield started
    for job_id in started:
        sdk.cancel(job_id)
        try:
            sdk.wait(job_id, timeout_s=60)
        except TimeoutError:
            pass
        for attempt in sdk.db().attempts(job_id):
            if attempt["handle"]:
                for member in LocalHandle.from_json(attempt["handle"]).processes:
                    member.signal_group(signal.SIGKILL)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_token_kernel_tensorflow_preemption_and_cancel_keep_the_files(jobs, tmp_path):
    doc = _start(_spec(tmp_path / "spec"))
    jobs.append(doc["id"])
    token_file = Path(doc["token_file"])
    token = token_file.read_text().strip()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token not in json.dumps(doc) and doc["url"].startswith("http://127.0.0.1:")
    port = int(doc["url"].split(":")[2].split("/")[0])

    assert request(port, "/api/kernels", None)[0] == 403, "a request without the token must be refused"
    assert request(port, "/api/kernels", "wrong-token")[0] == 403
    assert request(port, "/api/kernels", token)[0] == 200
    reply = run_cell(port, token, "import tensorflow as tf\n"
                                  "open('made.txt', 'w').write('tf ' + tf.__version__)")
    assert reply["status"] == "ok", reply

    # The spot instance is reclaimed: SIGTERM to the attempt's process group (a process this test started).
    server = json.loads(open_store(sdk.status(doc["id"])["store"]).read_bytes("notebook/server.json"))
    first = LocalHandle.from_json(sdk.db().attempts(doc["id"])[0]["handle"])
    assert first.chief.pid == server["pid"]
    first.chief.signal_group(signal.SIGTERM)
    wait_for(lambda: sdk.db().attempts(doc["id"])[0]["state"] == AttemptState.PREEMPTED, 60,
             "attempt 1 to end preempted after SIGTERM")
    where = wait_for(lambda: (lambda w: w if w["attempt"] == 2 else None)(
        interactive.notebook_where(doc["id"], START_S)), START_S, "attempt 2's notebook server to answer")
    assert where["token_file"] == doc["token_file"]  # the same token opens the relaunched notebook
    port2 = int(where["url"].split(":")[2].split("/")[0])
    status, made = request(port2, "/api/contents/made.txt?content=1", token)
    assert status == 200 and made["content"].startswith("tf 2."), (status, made)
    assert Path(server["workdir"]) != Path(json.loads(open_store(sdk.status(doc["id"])["store"]).read_bytes(
        "notebook/server.json"))["workdir"]), "the relaunch restores into a fresh folder"

    # `notebook open` prints the URL with the token; its --json never holds the token.
    opened = subprocess.run(spotfit_cmd("notebook", "open", doc["id"]), capture_output=True, text=True, timeout=60)
    assert opened.returncode == 0 and f"{where['url']}?token={token}" in opened.stdout, opened.stderr
    opened = subprocess.run(spotfit_cmd("notebook", "open", doc["id"], "--json"), capture_output=True, text=True,
                            timeout=60)
    assert opened.returncode == 0 and token not in opened.stdout and json.loads(opened.stdout)["attempt"] == 2
    # `spotfit ssh JOB -- CMD` runs in the attempt's working folder.
    shell = subprocess.run(spotfit_cmd("ssh", doc["id"], "--", "ls"), capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0 and "made.txt" in shell.stdout.split(), (shell.stdout, shell.stderr)
    # `spotfit port-forward JOB LOCAL:REMOTE` relays on loopback (stopped by its pid).
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        free = sock.getsockname()[1]
    relay = subprocess.Popen(spotfit_cmd("port-forward", doc["id"], f"{free}:{port2}"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        assert relay.stdout is not None
        line = relay.stdout.readline()
        assert f"127.0.0.1:{free} -> 127.0.0.1:{port2}" in line, line
        assert request(free, "/api/contents/made.txt", token)[0] == 200
        assert request(free, "/api/contents/made.txt", None)[0] == 403
    finally:
        relay.kill()
        relay.wait()

    # Written after the last sync (sync_s is an hour): only the stop's sync can save it.
    status, _ = request(port2, "/api/contents/after.txt", token, "PUT",
                        {"type": "file", "format": "text", "content": "written before cancel"})
    assert status in (200, 201)
    pid2 = json.loads(open_store(sdk.status(doc["id"])["store"]).read_bytes("notebook/server.json"))["pid"]
    out = subprocess.run(spotfit_cmd("cancel", doc["id"]), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    final = sdk.wait(doc["id"], timeout_s=120)
    assert final["state"] == "cancelled"
    store = open_store(final["store"])
    assert store.read_bytes("notebook/files/after.txt") == b"written before cancel"
    assert store.read_bytes("notebook/files/made.txt").startswith(b"tf 2.")
    assert not psutil.pid_exists(pid2) or psutil.Process(pid2).status() == psutil.STATUS_ZOMBIE
    assert not _port_open(port2), "the server must be stopped"


class _Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 — http.server's name
        self.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_idle_notebook_saves_stops_notifies_and_is_billed(jobs, tmp_path):
    hook = http.server.HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        seed = tmp_path / "seed"
        seed.mkdir()
        (seed / "analysis.ipynb").write_text("{}")
        spec = tmp_path / "notebook.yaml"
        spec.write_text("name: nb\nkind: notebook\nmarket: {trace: null}\nnotebook: {sync_s: 3600, folder: seed}\n"
                        "rules: [{rule: idle_notebook, for_s: 3}]\n"
                        f"notify: {{webhook: 'http://127.0.0.1:{hook.server_port}/hook'}}\n")
        doc = _start(spec)
        jobs.append(doc["id"])
        final = sdk.wait(doc["id"], timeout_s=120)
    finally:
        hook.shutdown()
        hook.server_close()
    assert final["state"] == "stopped", final
    rule = [e for e in sdk.events(doc["id"]) if e["kind"] == "rule"]
    assert rule and rule[0]["data"]["rule"] == "idle_notebook" and rule[0]["data"]["action"] == "stop"
    assert "no kernel activity" in rule[0]["message"]
    assert [p["rule"] for p in _Hook.received] == ["idle_notebook"]
    ledger = sdk.cost(doc["id"])
    assert len(ledger["rows"]) == 1 and ledger["rows"][0]["billed_s"] > 0
    assert open_store(final["store"]).read_bytes("notebook/files/analysis.ipynb") == b"{}"  # the seed folder
