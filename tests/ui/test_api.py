"""The dashboard's token gate and its JSON API (the CLI's `--json` documents), without a browser."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from spotfit import sdk
from spotfit.ui.app import create_app
from tests.support.jobs import DIGITS, spotfit_cmd
from tests.support.statedb import seed_jobs
from tests.support.wait import wait_for

TOKEN = "test-token-5f2c"


@pytest.fixture
def seeded(spotfit_home) -> tuple[Path, list[str]]:
    path = spotfit_home / "state.db"
    return path, seed_jobs(path, 3, running_every=2)


def fastapi_app(app) -> FastAPI:
    """The FastAPI app inside the middleware (security headers, token gate, CSRF guard)."""
    while not isinstance(app, FastAPI):
        app = app.app
    return app


def _routes(app) -> list[tuple[str, str]]:
    """Every (method, path) the dashboard serves, path parameters filled in."""
    fill = {"ref": "seeded-00000", "name": "ui.js", "job_id": "seeded-00000", "path": "data/runs"}
    return [(method, re.sub(r"{(\w+)(:\w+)?}", lambda m: fill[m.group(1)], route.path))
            for route in fastapi_app(app).routes if isinstance(route, APIRoute) for method in route.methods]


def test_every_route_answers_401_without_the_token_or_with_a_wrong_one(seeded):
    path, _ = seeded
    app = create_app(path, TOKEN)
    routes = _routes(app)
    assert {p for _, p in routes} >= {"/", "/jobs/seeded-00000", "/api/jobs", "/api/jobs/seeded-00000/cost",
                                      "/plan", "/sweeps", "/static/plotly.min.js"}
    client = TestClient(app, follow_redirects=False)
    for method, url in routes:
        for headers in ({}, {"Authorization": "token wrong"}, {"Cookie": "spotfit_ui_token=wrong"}):
            assert client.request(method, url, headers=headers).status_code == 401, (method, url, headers)
        assert client.request(method, url + "?token=wrong").status_code == 401, (method, url)


def test_the_token_in_the_url_sets_a_cookie_and_leaves_the_address_bar(seeded):
    path, ids = seeded
    client = TestClient(create_app(path, TOKEN), follow_redirects=False)
    first = client.get(f"/jobs/{ids[0]}?token={TOKEN}")
    assert first.status_code == 303 and first.headers["location"] == f"/jobs/{ids[0]}"
    assert "httponly" in first.headers["set-cookie"].lower()
    assert client.get(f"/jobs/{ids[0]}").status_code == 200  # the cookie now
    assert TestClient(create_app(path, TOKEN)).get("/api/jobs", headers={"Authorization": f"Bearer {TOKEN}"}).is_success


def test_the_api_returns_the_clis_documents(seeded):
    path, ids = seeded
    client = TestClient(create_app(path, TOKEN), headers={"Authorization": f"token {TOKEN}"})

    def cli(*args: str):
        out = subprocess.run(spotfit_cmd(*args, "--json"), capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL, env=os.environ.copy())
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    assert client.get("/api/jobs?limit=2").json() == cli("list", "--limit", "2")
    assert client.get(f"/api/jobs/{ids[1]}/cost").json() == cli("cost", ids[1])
    status = client.get(f"/api/jobs/{ids[0]}").json()
    assert status == {**cli("status", ids[0]), "controller": status["controller"]}  # liveness is read each time
    assert client.get(f"/api/jobs/{ids[0]}/logs").json() == json.loads(json.dumps(sdk.logs(ids[0]), default=str))
    spec = DIGITS / "spotfit.yaml"
    assert client.post("/api/plan", content=spec.read_bytes()).json() == cli("plan", str(spec))
    assert client.post("/api/plan?trace=aws-v100", content=spec.read_bytes()).json() == cli("plan", str(spec))


def test_errors_are_one_line_documents_with_a_hint(seeded):
    path, _ = seeded
    client = TestClient(create_app(path, TOKEN), headers={"Authorization": f"token {TOKEN}"})
    missing = client.get("/api/jobs/no-such-job")
    assert missing.status_code == 404 and "no-such-job" in missing.json()["error"] and missing.json()["hint"]
    assert client.get("/api/jobs?limit=0").status_code == 400
    assert "No job matches" in client.get("/jobs/no-such-job").text


def test_spotfit_ui_prints_its_url_with_the_token_and_never_logs_it(seeded, tmp_path):
    proc = subprocess.Popen(spotfit_cmd("ui", "--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, stdin=subprocess.DEVNULL, env={**os.environ, "SPOTFIT_UI_TOKEN": TOKEN})
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    try:
        wait_for(lambda: any("spotfit ui: open" in line for line in lines), 60, "`spotfit ui` to print its URL")
        url = next(line for line in lines if "spotfit ui: open" in line).split("open ", 1)[1].strip()
        assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/\?token={TOKEN}", url), url
        base = url.split("?")[0]
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))  # follows redirects
        for target in (url, f"{base}api/jobs?token={TOKEN}", f"{base}jobs/seeded-00000?token={TOKEN}&x=1"):
            with browser.open(target, timeout=60) as response:
                assert response.status == 200
        wait_for(lambda: sum('"GET /' in line for line in lines) >= 4, 30, "the access log lines of 4 requests")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    log = "".join(lines)
    assert log.count(TOKEN) == 1, log  # the printed URL, nowhere else
    assert '"GET /api/jobs HTTP/1.1" 200' in log and '"GET /jobs/seeded-00000 HTTP/1.1" 200' in log, log


def test_a_missing_ui_extra_is_named_with_the_install_hint():
    probe = ("import sys; sys.modules['uvicorn'] = None\n"
             "from spotfit.cli import main; sys.argv = ['spotfit', 'ui']; main()")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "spotfit[ui]" in out.stderr and "uvicorn" in out.stderr, out.stderr


def _self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    out = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                          str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    return cert, key


def test_spotfit_ui_serves_https_with_a_certificate_and_its_cookie_is_secure(seeded, tmp_path):
    import http.client
    import ssl

    cert, key = _self_signed(tmp_path)
    proc = subprocess.Popen(spotfit_cmd("ui", "--port", "0", "--tls-cert", str(cert), "--tls-key", str(key)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            env={**os.environ, "SPOTFIT_UI_TOKEN": TOKEN})
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    try:
        line = wait_for(lambda: next((x for x in lines if "spotfit ui: open" in x), None), 60, "the URL")
        url = line.split("open ", 1)[1].strip()
        assert re.fullmatch(rf"https://127\.0\.0\.1:\d+/\?token={TOKEN}", url), url
        port = int(url.split(":")[2].split("/")[0])
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=60,
                                           context=ssl.create_default_context(cafile=str(cert)))
        conn.request("GET", f"/api/jobs?token={TOKEN}")
        answer = conn.getresponse()
        cookie = answer.getheader("set-cookie", "").lower()
        assert answer.status == 303 and "; secure" in cookie and "httponly" in cookie, (answer.status, cookie)
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def test_a_bad_tls_pair_is_one_line_and_exit_2(seeded, tmp_path):
    cert, key = _self_signed(tmp_path)
    for args, expected in ((["--tls-cert", str(cert)], "without `--tls-key`"),
                           (["--tls-cert", str(cert), "--tls-key", str(cert)], "do not load as a certificate"),
                           (["--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(key)], "expected a PEM file")):
        out = subprocess.run(spotfit_cmd("ui", "--port", "0", *args), capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL, env=os.environ.copy())
        assert out.returncode == 2 and expected in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and "BEGIN" not in out.stderr


def test_an_address_or_port_the_dashboard_cannot_bind_is_one_line_and_exit_2(seeded):
    # Before, uvicorn printed its log lines and the CLI exited 3. 192.0.2.1 (TEST-NET-1) is no address of this
    # machine; binding it sends nothing anywhere.
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        for args, expected in ((["--host", "192.0.2.1", "--port", "0"], "Cannot serve the dashboard on 192.0.2.1:0"),
                               (["--port", str(busy.getsockname()[1])], "Address already in use")):
            out = subprocess.run(spotfit_cmd("ui", *args), capture_output=True, text=True, timeout=60,
                                 stdin=subprocess.DEVNULL, env=os.environ.copy())
            assert out.returncode == 2 and expected in out.stderr, out.stderr
            lines = out.stderr.strip().splitlines()
            assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
    finally:
        busy.close()
