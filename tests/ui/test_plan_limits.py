"""The dashboard's plans are bounded: a time limit, and a plan whose client left is stopped (issue 47).

A plan runs in a worker thread that cannot be killed, so the simulator's tick loops ask between
ticks whether to give up (spotfit/market/stopping.py). With a limit of 0 s every plan stops at
its first check: the answer is 503 and one line, whatever the machine's speed. The client that
leaves is shown on a real `spotfit ui`: its plan is held at the `plan_running` crash point while
the client sends its request and closes the connection; once the server has said it saw the
client go, the plan is released and must stop at its first check instead of running to its end.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

from fastapi.testclient import TestClient

from spotfit.core.crashpoints import HOLD_ENV
from spotfit.ui.app import create_app
from spotfit.ui.planning import LIMIT_ENV
from tests.support.jobs import DIGITS, spotfit_cmd
from tests.support.wait import wait_for

TOKEN = "test-token-plan"
AUTH = {"Authorization": f"token {TOKEN}"}


def test_a_plan_over_the_time_limit_is_stopped_with_one_line_and_503(spotfit_home, monkeypatch):
    spec = (DIGITS / "spotfit.yaml").read_bytes()
    client = TestClient(create_app(spotfit_home / "state.db", TOKEN), headers=AUTH)
    assert client.post("/api/plan", content=spec).status_code == 200  # the limit's default: it plans
    monkeypatch.setenv(LIMIT_ENV, "0")
    stopped = client.post("/api/plan", content=spec)
    assert stopped.status_code == 503, stopped.text
    assert stopped.json()["error"] == "The plan took longer than the dashboard's limit of 0 s."
    assert "spotfit plan SPEC" in stopped.json()["hint"]
    page = client.post("/plan", data={"spec": spec.decode()}, headers={"X-CSRF-Token": _csrf()})
    assert page.status_code == 503 and "limit of 0 s" in page.text


def _csrf() -> str:
    from spotfit.ui.guard import csrf_token

    return csrf_token(TOKEN)


def test_a_plan_whose_client_leaves_is_stopped(spotfit_home, tmp_path: Path):
    holds = tmp_path / "holds"
    holds.mkdir()
    env = {**os.environ, "SPOTFIT_UI_TOKEN": TOKEN, HOLD_ENV: f"plan_running:{holds}"}
    proc = subprocess.Popen(spotfit_cmd("ui", "--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, stdin=subprocess.DEVNULL, env=env)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    try:
        wait_for(lambda: any("spotfit ui: open" in line for line in lines) or proc.poll() is not None, 60,
                 "`spotfit ui` to print its URL")
        url = next(line for line in lines if "spotfit ui: open" in line).split("open ", 1)[1].strip()
        port = int(url.split(":")[2].split("/")[0])
        body = (DIGITS / "spotfit.yaml").read_bytes()
        with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
            conn.sendall(b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1\r\n" + f"Authorization: token {TOKEN}\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            wait_for(lambda: (holds / "plan_running.reached").exists(), 60, "the plan's worker to start")
        # The client is gone, its plan held before its first tick: the server must notice, then stop it.
        wait_for(lambda: any("left; stopping it" in line for line in lines), 60, "the server to see the client go")
        (holds / "plan_running.release").touch()
        wait_for(lambda: any("plan stopped:" in line for line in lines), 60, "the plan to stop")
    finally:
        proc.terminate()
        proc.wait(30)
    log = "".join(lines)
    assert "spotfit ui: plan stopped: The plan's client left before it was ready." in log, log
