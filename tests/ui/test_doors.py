"""The dashboard's doors, tried as an attacker would: it reads no file a request names, takes no POST from
another origin or without its CSRF token, sends its security headers, and serves TensorBoard only
through its token-gated proxy (TensorBoard itself on a Unix socket no other user may open)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from spotfit.state.db import StateDB
from spotfit.ui.app import create_app
from spotfit.ui.guard import csrf_token
from tests.support.jobs import DIGITS
from tests.support.statedb import seed_jobs
from tests.support.wait import wait_for
from tests.ui.test_api import TOKEN, fastapi_app

AUTH = {"Authorization": f"token {TOKEN}"}
CANARY = "canary-3c1f9a"  # what the secret files hold: it must come back in no answer
_watched: list[str] = []  # paths whose opening the audit hook records (while a test sets them)
_opened: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _watched and isinstance(args[0], str | bytes | os.PathLike):
        path = os.fsdecode(args[0])
        if any(w in path for w in _watched):
            _opened.append(path)


sys.addaudithook(_audit)  # every open() in this process, the app's threads included: the proof no file is read


@pytest.fixture
def secrets_on_disk(tmp_path):
    """Two files a request might name: a YAML spec and a CSV trace, both holding the canary."""
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "spotfit.yaml").write_text(f"name: {CANARY}\nscript: train.py\n")
    (folder / "trace.csv").write_text(f"tick,timestamp,zone,available\n0,{CANARY},z,1\n")
    _watched.append(str(folder))
    yield folder
    _watched.clear()
    _opened.clear()


@pytest.fixture
def app(spotfit_home):
    seed_jobs(spotfit_home / "state.db", 2, running_every=2)
    return create_app(spotfit_home / "state.db", TOKEN)


def _templates(app) -> list[tuple[str, str]]:
    return [(method, route.path) for route in fastapi_app(app).routes if isinstance(route, APIRoute)
            for method in route.methods]


def test_no_route_reads_a_file_a_request_names(app, secrets_on_disk):
    client = TestClient(app, headers={**AUTH, "X-CSRF-Token": csrf_token(TOKEN)})
    paths = [str(secrets_on_disk / "spotfit.yaml"), str(secrets_on_disk / "trace.csv")]
    tried = 0
    for path in paths:
        values = [path, path.replace("/", "%2F"), "../../../../.." + path, "file://" + path]
        query = {name: path for name in ("spec", "trace", "job", "path", "file", "logdir", "name", "q", "state")}
        for method, template in _templates(app):
            params = re.findall(r"{(\w+)(?::\w+)?}", template)
            for value in values:
                url = re.sub(r"{(\w+)(:\w+)?}", value, template) if params else template
                bodies = [None] if method in ("GET", "HEAD") else [path.encode(), f"spec={path}&trace={path}".encode(),
                                                                   f"market: {{trace: {path}}}".encode()]
                for body in bodies:
                    answer = client.request(method, url, params=query, content=body)
                    tried += 1
                    assert answer.status_code < 500, (method, url, answer.text)
                    assert CANARY not in answer.text, (method, url, answer.text)
    assert tried > 100
    assert _opened == [], f"files opened for a request: {sorted(set(_opened))}"


def test_plan_takes_a_specs_content_and_refuses_paths_in_it(app, secrets_on_disk, spotfit_home):
    client = TestClient(app, headers=AUTH)
    refused = client.get("/api/plan", params={"spec": str(secrets_on_disk / "spotfit.yaml")})
    assert refused.status_code == 400 and "never a path" in refused.json()["error"]
    for trace in (str(secrets_on_disk / "trace.csv"), "/etc/shadow"):
        posted = client.post("/api/plan", content=f"name: p\nscript: t.py\nmarket: {{trace: {trace}}}\n".encode())
        assert posted.status_code == 400 and "bundled trace name" in posted.json()["error"], posted.text
        by_param = client.post("/api/plan", params={"trace": trace}, content=(DIGITS / "spotfit.yaml").read_bytes())
        assert by_param.status_code == 400 and "bundled trace name" in by_param.json()["error"]
    big = client.post("/api/plan", content=b"#" * (256 * 1024 + 1))
    assert big.status_code == 413
    known = client.get("/api/plan", params={"job": "seeded-00000"})
    assert known.status_code == 200 and known.json()["offers"]
    db = StateDB(spotfit_home / "state.db")
    db.create_job("foreign-0001", "foreign", json.dumps({"name": "foreign", "script": "t.py", "market": {
        "trace": str(secrets_on_disk / "trace.csv")}}), "memory://foreign")  # another user's job, on a shared DB
    db.close()
    theirs = client.get("/api/plan", params={"job": "foreign-0001"})
    assert theirs.status_code == 400 and "of job foreign-0001" in theirs.json()["error"], theirs.text
    page = client.get("/plan", params={"job": "seeded-00000"})  # a job page's "Plan this job"
    assert page.status_code == 200 and "Job seeded-00000:" in page.text and '<table class="offers">' in page.text
    assert 'href="/plan?job=seeded-00000"' in client.get("/jobs/seeded-00000").text
    assert _opened == []


def _cookie_client(app, **kwargs) -> TestClient:
    client = TestClient(app, follow_redirects=False, **kwargs)
    assert client.get(f"/?token={TOKEN}").status_code == 303  # the cookie, as a browser gets it
    return client


def test_a_post_from_another_origin_or_without_the_csrf_token_is_refused(app):
    with _cookie_client(app) as client:  # the lifespan: a TensorBoard started by mistake is stopped with the app
        _try_posts(app, client)


def _try_posts(app, client: TestClient) -> None:
    spec = (DIGITS / "spotfit.yaml").read_text()
    good = {"csrf": csrf_token(TOKEN), "spec": spec}
    posts = [(m, re.sub(r"{(\w+)(:\w+)?}", "seeded-00000", p)) for m, p in _templates(app) if m == "POST"]
    assert {p for _, p in posts} >= {"/plan", "/api/plan", "/jobs/seeded-00000/tensorboard"}
    for _, url in posts:
        for headers in ({"Origin": "http://evil.example"}, {"Origin": "http://testserver:1"},
                        {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}):
            assert client.post(url, data=good, headers=headers).status_code == 403, (url, headers)
        assert client.post(url, data={"spec": spec}).status_code == 403, url  # the cookie alone
        assert client.post(url, data={**good, "csrf": "wrong"}).status_code == 403, url
        assert client.post(url, headers={"X-CSRF-Token": "wrong"}).status_code == 403, url
        header = TestClient(app, headers={**AUTH, "Origin": "http://evil.example"})
        assert header.post(url, data=good).status_code == 403, url
    # The dashboard's own page: its form's CSRF field, its Origin (or `null`, as no-referrer makes it).
    for origin in ("http://testserver", "null"):
        answer = client.post("/plan", data=good, headers={"Origin": origin, "Sec-Fetch-Site": "same-origin"})
        assert answer.status_code == 200 and "<table class=\"offers\">" in answer.text, answer.text[:300]
    fetched = client.post("/api/plan", content=spec.encode(), headers={"X-CSRF-Token": csrf_token(TOKEN)})
    assert fetched.status_code == 200 and fetched.json()["offers"]
    assert TestClient(app, headers=AUTH).post("/api/plan", content=spec.encode()).status_code == 200  # a script


def test_every_response_carries_the_security_headers(app):
    client = _cookie_client(app)
    answers = [client.get(p) for p in ("/", "/jobs/seeded-00000", "/plan", "/sweeps", "/api/jobs", "/static/ui.js",
                                      "/static/plotly.min.js", "/jobs/no-such-job", "/api/jobs/no-such-job")]
    answers += [TestClient(app).get("/"), client.post("/plan", data={"spec": "x"})]  # a 401, a 403
    assert [a.status_code for a in answers] == [200] * 7 + [404, 404, 401, 403]
    for answer in answers:
        headers = answer.headers
        assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
        csp = dict(d.strip().split(" ", 1) for d in headers["content-security-policy"].split(";"))
        assert csp["script-src"] == "'self'" and csp["default-src"] == "'none'"
        assert csp["frame-ancestors"] == "'none'" and csp["form-action"] == "'self'"
    page = answers[1].text
    assert re.findall(r"<script(?![^>]*(src=|type=\"application/json\"))", page) == []  # no inline script
    assert not re.search(r"\son[a-z]+=", page)  # no inline handler


def test_a_query_token_is_swapped_for_the_cookie_on_the_api_too(app):
    client = TestClient(app, follow_redirects=False)
    swapped = client.get(f"/api/jobs?limit=1&token={TOKEN}")
    assert swapped.status_code == 303 and swapped.headers["location"] == "/api/jobs?limit=1"
    cookie = swapped.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "secure" not in cookie
    assert client.get("/api/jobs?limit=1").status_code == 200  # with the cookie now
    assert TestClient(app).post(f"/api/plan?token={TOKEN}", content=b"x").status_code == 401  # GET alone takes it
    over_tls = TestClient(app, base_url="https://testserver", follow_redirects=False).get(f"/?token={TOKEN}")
    assert "; secure" in over_tls.headers["set-cookie"].lower()


def _write_events(folder: Path) -> None:
    writer = EventFileWriter(str(folder))
    for step, value in ((1, 2.0), (2, 1.5)):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="batch_loss", simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary))
    writer.close()


def _tcp_listeners(pid: int) -> list[str]:
    """The TCP sockets process `pid` listens on (its fds matched against /proc/net/tcp{,6})."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                listening.append(fields[1])
    return listening


def _tensorboard_process(job_id: str) -> tuple[int, str]:
    """The pid and the socket of the dashboard's TensorBoard for `job_id`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"spotfit.ui.tensorboard_socket" in argv and job_id.encode() in argv:
            return int(proc.name), argv[-3].decode()
    raise AssertionError(f"no TensorBoard process for {job_id}")


@pytest.mark.slow
def test_tensorboard_is_reached_through_the_proxy_with_the_token_and_in_no_other_way(spotfit_home):
    job_id = "tb-proxy-0001"
    store = spotfit_home / "store" / "jobs" / job_id
    _write_events(store / "tensorboard" / "train")
    db = StateDB(spotfit_home / "state.db")
    db.create_job(job_id, "tb-proxy", json.dumps({"name": "tb-proxy", "script": "t.py"}), f"file://{store}")
    db.close()
    base = f"/jobs/{job_id}/tensorboard/"
    with TestClient(create_app(spotfit_home / "state.db", TOKEN), follow_redirects=False) as client:
        missing = client.get(base, headers=AUTH)
        assert missing.status_code == 404 and "Open TensorBoard" in missing.text  # not started: nothing to reach
        assert "script-src 'self'" in missing.headers["content-security-policy"]  # the dashboard's own page
        started = client.post(f"/jobs/{job_id}/tensorboard", headers=AUTH)
        assert started.status_code == 303 and started.headers["location"] == base
        assert client.get(base).status_code == 401
        assert client.get(base, headers={"Cookie": "spotfit_ui_token=wrong"}).status_code == 401
        assert client.get(base + "data/runs").status_code == 401
        page = client.get(base, headers=AUTH)
        assert page.status_code == 200 and "<tb-webapp" in page.text
        assert page.headers["x-frame-options"] == "SAMEORIGIN" and "'unsafe-eval'" in page.headers[
            "content-security-policy"]  # TensorBoard's own CSP (its app needs eval), framed by itself alone
        runs = wait_for(lambda: client.get(base + "data/runs", headers=AUTH).json() or None, 120,
                        "TensorBoard to list the job's run")
        assert runs == ["train"]
        # TensorBoard's own POSTs from its page: the cookie and its X-XSRF-Protected header, same origin.
        assert client.get(f"/?token={TOKEN}").status_code == 303  # the cookie, from now on
        series = {"requests": json.dumps([{"plugin": "scalars", "tag": "batch_loss", "run": "train"}])}
        query = base + "data/plugin/timeseries/timeSeries"
        answer = client.post(query, data=series, headers={"X-XSRF-Protected": "1", "Origin": "http://testserver"})
        assert answer.status_code == 200 and answer.json()[0]["runToSeries"]["train"], answer.text[:300]
        assert client.post(query, data=series).status_code == 403  # the cookie alone
        assert client.post(query, data=series, headers={"X-XSRF-Protected": "1",
                                                        "Origin": "http://evil.example"}).status_code == 403

        pid, sock = _tensorboard_process(job_id)
        assert _tcp_listeners(pid) == []  # no TCP port at all: the Unix socket alone
        assert os.stat(Path(sock).parent).st_mode & 0o777 == 0o700
        if os.geteuid() == 0:  # as another local user (nobody): the socket cannot be opened
            probe = f"import socket; socket.socket(socket.AF_UNIX).connect({sock!r})"
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                                  "-c", probe], capture_output=True, text=True, timeout=60)
            assert out.returncode != 0 and "PermissionError" in out.stderr, out.stderr
    assert not Path(sock).parent.exists()  # stopped with the dashboard, its folder removed
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
