"""The dashboard in a real browser: Debian's chromium, headless, driven by Playwright, on 127.0.0.1.

One replayed job runs for the module (the digits MLP's shape on the bundled trace, from a tick
where spot in us-east-1f lasts one tick: the market preempts the first attempt, the policy runs
on-demand, then switches back to spot). Its attempts are hollow (spotfit/hollow/: the real
runtime around a NumPy stand-in, no TensorFlow), and every attempt stands still after step 30
until the test lets it train on (`Dashboard.release`), so the first test sees the job running
whatever the machine's speed. The job's TensorBoard logs are written by the test (the runtime's
own tests cover writing them). The pages are read as a user sees them: the figures plotly.js
drew (`div.data` and the SVG it rendered), the rows the page updated by itself.

`SPOTFIT_UI_SCREENSHOTS=DIR` also saves one screenshot per page there (docs/img/ comes from it).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from spotfit import sdk
from spotfit.hollow import HOLLOW_ENV
from spotfit.state.states import JobState
from spotfit.sweep.store import SweepDB
from spotfit.ui.charts import iso
from tests.support.hollow_jobs import write_hollow_spec
from tests.support.job_report import report_also
from tests.support.jobs import DIGITS, spotfit_cmd
from tests.support.ledger import ticks
from tests.support.wait import wait_for
from tests.ui.browser import launch, serve, wait_in_page

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SCRIPT = Path(__file__).resolve().parents[1] / "controller" / "scripts" / "market_train.py"
ZONE = "us-east-1f"
SPEC = f"""
name: ui-parity
script: market_train.py
args: ["--epochs", "2"]
market: {{trace: aws-v100, zones: [{ZONE}], start: "2023-03-19T17:43:31", time_scale: 2000, overhead_h: 0.2}}
checkpoint: {{interval: {{steps: 25}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
work_h: 2.0
deadline_h: 3.0
"""
TOKEN = "browser-test-token-8d1e"
JOB_TIMEOUT_S = 300
HELD_AFTER_STEP = 30  # every attempt stands still after this step until `Dashboard.release` exists
PAGE_TIMEOUT_MS = 120_000


@dataclass
class Dashboard:
    home: Path
    url: str  # with the token

    @property
    def base(self) -> str:
        return self.url.split("?")[0]

    @property
    def release(self) -> Path:
        """The file that lets the module's job train on past `HELD_AFTER_STEP`."""
        return self.home.with_name(self.home.name + "-train-on")

    def env(self) -> dict[str, str]:
        return {**os.environ, "SPOTFIT_HOME": str(self.home)}


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory, request) -> Iterator[Dashboard]:
    """`spotfit ui --port 0` over a home of the module's own."""
    home = tmp_path_factory.mktemp("ui-home")
    report_also(request, home)  # the replayed job's (`job`)
    with serve({**os.environ, "SPOTFIT_HOME": str(home), "SPOTFIT_UI_TOKEN": TOKEN}) as url:
        yield Dashboard(home, url)


@pytest.fixture(scope="module")
def browser(dashboard) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = launch(pw)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def job(dashboard, tmp_path_factory) -> Iterator[str]:
    """The replayed job, started detached on hollow attempts: it runs, held, while the first test watches."""
    spec = write_hollow_spec(tmp_path_factory.mktemp("ui-job"), SPEC, script=SCRIPT, stall_after=HELD_AFTER_STEP,
                             stall_until=str(dashboard.release))
    out = subprocess.run(spotfit_cmd("run", str(spec), "--detach", "--json"), capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL, env={**dashboard.env(), HOLLOW_ENV: "1"})
    assert out.returncode == 0, out.stderr
    job_id = json.loads(out.stdout)["id"]
    yield job_id
    dashboard.release.touch()
    subprocess.run(spotfit_cmd("cancel", job_id), capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                   env=dashboard.env())


@pytest.fixture
def page(browser, dashboard, monkeypatch):
    """A page of a context of its own; the test fails if the CSP refused anything the dashboard's pages load."""
    monkeypatch.setenv("SPOTFIT_HOME", str(dashboard.home))  # this process's sdk reads the dashboard's home
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    opened = context.new_page()
    refused: list[str] = []
    opened.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    opened.on("pageerror", lambda err: refused.append(str(err)))  # e.g. an eval the CSP stopped
    yield opened
    context.close()
    assert refused == [], refused


def _screenshot(page, name: str, tmp_path: Path) -> None:
    for folder in filter(None, (tmp_path, os.environ.get("SPOTFIT_UI_SCREENSHOTS"))):
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def _finished(dashboard: Dashboard, job_id: str) -> dict:
    """The job's status once it ended (let past its hold)."""
    dashboard.release.touch()

    def ended() -> dict | None:
        doc = sdk.status(job_id)
        return doc if JobState(doc["state"]).is_terminal() else None

    return wait_for(ended, JOB_TIMEOUT_S, f"job {job_id} to finish", poll_s=0.5)


def _open_job_page(page, dashboard: Dashboard, job_id: str) -> None:
    page.goto(dashboard.url)  # the token sets the cookie
    page.goto(f"{dashboard.base}jobs/{job_id}")
    wait_in_page(page, "['timeline', 'cost', 'progress'].every(id => document.getElementById(id).data)")


def _trace(page, chart: str, name: str) -> dict:
    traces = page.evaluate(f"document.getElementById('{chart}').data.map(t => ({{name: t.name, x: t.x, y: t.y}}))")
    return next(t for t in traces if t["name"] == name)


def test_the_jobs_page_lists_a_job_as_it_runs(page, dashboard, job, tmp_path):
    page.goto(dashboard.url)
    assert page.url == dashboard.base  # the token left the address bar for a cookie
    page.evaluate("window.sameDocument = true")
    wait_in_page(page,
        """id => { const row = document.querySelector(`tr[data-job="${id}"]`);
                   return row && row.dataset.state === 'running'
                          && parseInt(row.querySelector('.step').textContent) > 0; }""",
        arg=job)
    _screenshot(page, "jobs", tmp_path)
    assert page.evaluate("window.sameDocument") is True  # updated by polling, not by a reload
    dashboard.release.touch()  # seen running: let it train on
    wait_in_page(page, f"document.querySelector('tr[data-job=\"{job}\"]').dataset.state === 'completed'",
                           timeout=JOB_TIMEOUT_S * 1000)


def test_the_timeline_marks_each_attempt_and_the_preemption_at_its_trace_time(page, dashboard, job, tmp_path):
    status = _finished(dashboard, job)
    assert status["state"] == "completed", status
    preempted = [a for a in status["attempts"] if a["state"] == "preempted"]
    assert preempted, status["attempts"]  # the window has a market preemption
    _open_job_page(page, dashboard, job)
    _screenshot(page, "job", tmp_path)

    attempts = _trace(page, "timeline", "attempts")
    assert attempts["y"] == [a["zone"] if a["market"] == "spot" else "on-demand" for a in status["attempts"]]
    bars = page.evaluate("document.querySelectorAll('#timeline .barlayer .trace')[1]"
                         ".querySelectorAll('.point').length")
    assert bars == len(status["attempts"])  # drawn: one bar per attempt

    marks = _trace(page, "timeline", "preemptions")
    assert marks["x"] == [iso(a["trace_end_s"]) for a in preempted] and marks["y"] == [ZONE] * len(preempted)
    drawn = page.evaluate("document.querySelectorAll('#timeline .scatterlayer .trace')[0]"
                          ".querySelectorAll('.point').length")
    assert drawn == len(preempted)
    # The right trace time, read from the trace CSV itself: spot was up in the tick before, gone in the tick after.
    by_start = {t.start_s: t for t in ticks(ZONE)}
    for a in preempted:
        tick = by_start[a["trace_end_s"]]
        assert not tick.available and ticks(ZONE)[tick.number - 1].available, tick


def test_the_cost_charts_last_point_is_what_spotfit_cost_says(page, dashboard, job):
    _finished(dashboard, job)
    out = subprocess.run(spotfit_cmd("cost", job, "--json"), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, env=dashboard.env())
    assert out.returncode == 0, out.stderr
    totals = json.loads(out.stdout)["totals"]
    _open_job_page(page, dashboard, job)
    spent = _trace(page, "cost", "spent")
    assert spent["y"][-1] == pytest.approx(totals["spent_usd"], abs=1e-9)
    assert spent["x"][-1] == iso(sdk.status(job)["attempts"][-1]["trace_end_s"])
    assert _trace(page, "cost", "all on-demand")["y"][-1] == pytest.approx(totals["on_demand_usd"], abs=1e-9)
    assert page.locator("#spent").inner_text() == f"${totals['spent_usd']:,.4f}"


def _write_tensorboard_logs(job_id: str) -> None:
    """The `train` and `validation` runs a Keras job leaves under its store's `tensorboard/` (epoch_loss)."""
    store = Path(sdk.status(job_id)["store"].removeprefix("file://"))
    for run in ("train", "validation"):
        writer = EventFileWriter(str(store / "tensorboard" / run))
        for epoch, value in ((1, 2.0), (2, 1.5)):
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="epoch_loss", simple_value=value)])
            writer.add_event(event_pb2.Event(wall_time=1.0, step=epoch, summary=summary))
        writer.close()


def test_open_tensorboard_serves_it_through_the_dashboard(page, dashboard, job):
    _finished(dashboard, job)
    _write_tensorboard_logs(job)
    _open_job_page(page, dashboard, job)
    with page.context.expect_page(timeout=PAGE_TIMEOUT_MS) as opened:
        page.get_by_role("button", name="Open TensorBoard").click()  # a form post with the page's CSRF token
    board = opened.value
    board.wait_for_load_state("load", timeout=PAGE_TIMEOUT_MS)
    assert board.url == f"{dashboard.base}jobs/{job}/tensorboard/", board.url  # the proxy: no port of its own
    board.wait_for_selector("tb-webapp", state="attached")
    # TensorBoard serves this job's runs (its logs load in the background: wait for them). Until it has
    # loaded them, an answer may be an error or not yet JSON: that is "not yet", and the last one is shown.
    seen: list[str] = []

    def runs_listed() -> bool:
        answer = board.request.get(board.url + "data/runs", timeout=PAGE_TIMEOUT_MS)
        body = answer.text()
        seen[:] = [f"{answer.status} {body[:200]!r}"]
        try:
            runs = json.loads(body) if answer.ok else []
        except ValueError:
            return False
        return isinstance(runs, list) and {"train", "validation"} <= set(runs)

    wait_for(runs_listed, 120, lambda: f"TensorBoard to list the job's train and validation runs (last: {seen})",
             poll_s=0.5)
    # TensorBoard's own app, through the proxy: its run list shows the job's runs.
    wait_in_page(board, "document.body.innerText.includes('validation')", timeout=PAGE_TIMEOUT_MS)


def test_a_page_of_another_origin_cannot_post_to_the_dashboard(page, dashboard, job, tmp_path):
    """A page served on another port of 127.0.0.1 (same site, so the SameSite cookie goes along) posts a form
    to the dashboard, as a CSRF attack would: 403, and no TensorBoard is started."""
    import http.server
    import threading

    (tmp_path / "attack.html").write_text(
        f'<form id="f" method="post" action="{dashboard.base}jobs/{job}/tensorboard"></form>'
        '<script>document.getElementById("f").submit()</script>')
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page.goto(dashboard.url)  # the victim holds the dashboard's cookie
        with page.expect_response(lambda r: r.url.endswith(f"/jobs/{job}/tensorboard")) as posted:
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/attack.html")
        assert posted.value.status == 403 and posted.value.request.method == "POST"
    finally:
        server.shutdown()
        server.server_close()


def test_without_the_token_the_browser_gets_401(browser, dashboard, job):
    context = browser.new_context()
    try:
        anonymous = context.new_page()
        for path in ("", f"jobs/{job}", "api/jobs", f"api/jobs/{job}/cost", "plan", "sweeps", "static/plotly.min.js"):
            response = anonymous.goto(dashboard.base + path)
            assert response is not None and response.status == 401, path
    finally:
        context.close()


def test_the_plan_page_charts_the_ranked_offers(page, dashboard, tmp_path):
    spec = DIGITS / "spotfit.yaml"
    page.goto(dashboard.url)
    page.goto(f"{dashboard.base}plan")
    page.set_input_files("#spec-file", str(spec))  # read by the page and posted as text: the server opens no file
    wait_in_page(page, "document.getElementById('spec').value.includes('name: digits')")
    page.get_by_role("button", name="plan").click()
    wait_in_page(page, "document.getElementById('plan') && document.getElementById('plan').data")
    offers = sdk.plan(str(spec))["offers"]
    assert page.evaluate("document.getElementById('plan').data[0].x") == [o["expected_cost_usd"] for o in offers]
    assert page.evaluate("document.querySelectorAll('#plan .barlayer .point').length") == len(offers)
    _screenshot(page, "plan", tmp_path)


def test_the_sweep_page_draws_its_parallel_coordinates_and_links_the_trials_jobs(page, dashboard, job, tmp_path):
    sweep_id = "digits-sweep-b0a1c2"
    sweeps = SweepDB(dashboard.home / "sweeps.db")
    sweeps.create_sweep(sweep_id, "digits", json.dumps({"objective": {"metric": "val_accuracy", "mode": "max"}}))
    for number, (lr, value) in enumerate([(0.01, 0.91), (0.002, 0.95), (0.05, None)]):
        sweeps.add_trial(sweep_id, number, {"lr": lr, "units": 32})
        sweeps.update_trial(sweep_id, number, job_id=job, state="completed" if value else "pruned", value=value)
    page.goto(dashboard.url)
    page.goto(f"{dashboard.base}sweeps")
    _screenshot(page, "sweeps", tmp_path)
    page.click(f"a[href='/sweeps/{sweep_id}']")
    wait_in_page(page, "document.getElementById('parallel') && document.getElementById('parallel').data")
    dims = page.evaluate("document.getElementById('parallel').data[0].dimensions.map(d => [d.label, d.values])")
    assert dims == [["lr", [0.01, 0.002]], ["units", [32, 32]], ["val_accuracy", [0.91, 0.95]]]
    assert page.locator("#trials tbody tr").count() == 3
    assert page.locator(f"#trials tbody a[href='/jobs/{job}']").count() == 3
    _screenshot(page, "sweep", tmp_path)
