"""The dashboard's web application: pages (Jinja2 templates, Plotly charts) and the JSON API.

`/api/...` returns the very documents the CLI's `--json` prints, from the same SDK functions:

| route | document |
|---|---|
| `/api/jobs?limit=N` | `spotfit list --json` |
| `/api/jobs/{job}` | `spotfit status JOB --json` |
| `/api/jobs/{job}/cost` | `spotfit cost JOB --json` |
| `/api/jobs/{job}/logs?attempt=N` | `spotfit logs JOB --json` |
| `/api/costs?since=30d&by=project` | `spotfit cost --all --since 30d --by project --json` |
| `POST /api/plan?trace=NAME` (the spec's YAML as the body) | `spotfit plan SPEC --json` |
| `/api/plan?job=JOB&trace=NAME` | `spotfit plan` of the job's recorded spec |
| `/api/sweeps` | every sweep's `spotfit sweep status SWEEP --json`, newest first |
| `/api/sweeps/{sweep}` | `spotfit sweep status SWEEP --json` |
| `/api/board?state=S&q=TEXT&limit=N` | the jobs page's rows (cost and saving per job; no CLI verb prints it) |
| `/metrics` | the state's Prometheus metrics (`spotfit/metrics.py`), as `spotfit controller --metrics-port` does |

Every request reads the state DB (a SQLite file, or a team's PostgreSQL where `SPOTFIT_STATE_URL`
points) through its own read-only connection (`ReadOnlyStateDB`),
handed to the SDK with `sdk.reading_from`, and the sweep DB through another (`ReadOnlySweepDB`).
Routes are plain functions: Starlette runs them in its thread pool, and SQLite connections stay
in the thread that opened them. No route reads a file a request names (`planning.py`); the
middleware around them (`guard.py`, `auth.py`) checks the token, the Origin and the CSRF token,
and adds the security headers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.types import ASGIApp

from spotfit import arguments, sdk
from spotfit.errors import NotFoundError, SpotfitError, UsageError
from spotfit.home import home
from spotfit.market.stopping import Stopped
from spotfit.state.dialect import display_target
from spotfit.state.states import JobState
from spotfit.sweep.store import sweeps_target
from spotfit.ui import board, charts, planning, sweepview, tensorboard_proxy
from spotfit.ui.auth import TokenGate
from spotfit.ui.guard import CsrfGuard, SecurityHeaders, csrf_token
from spotfit.ui.jobpage import CostCache, job_page, with_hindsight
from spotfit.ui.readonly import ReadOnlyStateDB, ReadOnlySweepDB
from spotfit.ui.tensorboards import TensorBoards, prefix

HERE = Path(__file__).resolve().parent
POLL_MS = 2000  # how often an open page asks for news
# Jobs on the board's first page, newest first; "show more" adds as many (`?limit=N`). What the first
# render costs grows with it: each row is a ledger on the server and some 40 DOM nodes in the browser.
BOARD_LIMIT = 50


def plotly_js() -> Path:
    """plotly.js as the `plotly` package ships it: served from here, nothing fetched from the web."""
    return Path(str(files("plotly") / "package_data" / "plotly.min.js"))


def create_app(target: str | Path, token: str) -> ASGIApp:
    """The dashboard over the state DB at `target` (a SQLite path or a `postgresql://` URL), behind `token`."""
    tensorboards = TensorBoards(home() / "cache" / "tensorboard")  # `spotfit tensorboard`'s cache of remote logs
    costs = CostCache()

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        tensorboards.stop_all()

    app = FastAPI(title="spotfit", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.trim_blocks = templates.env.lstrip_blocks = True  # a thousand rows, not a thousand blank lines
    templates.env.filters.update(usd=_usd, when=_when, pct=_pct)
    templates.env.globals.update(poll_ms=POLL_MS, page_rows=BOARD_LIMIT, terminal=lambda s: JobState(s).is_terminal(),
                                 csrf=csrf_token(token), traces=planning.TRACES)

    @contextmanager
    def reading() -> Iterator[ReadOnlyStateDB]:
        db = ReadOnlyStateDB(target)
        try:
            with sdk.reading_from(db):
                yield db
        finally:
            db.close()

    @contextmanager
    def reading_sweeps() -> Iterator[tuple[ReadOnlySweepDB, ReadOnlyStateDB] | None]:
        """The sweep DB and the state DB, read-only; None where no sweep has run with this state yet."""
        sweeps = ReadOnlySweepDB.open(sweeps_target(target))  # where the sweep controller keeps it
        if sweeps is None:
            yield None
            return
        try:
            with reading() as jobs:
                yield sweeps, jobs
        finally:
            sweeps.close()

    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, context)

    def board_rows(limit: int, choice: str, q: str) -> tuple[list[dict], int]:
        """The board's rows (newest `limit` matching jobs) and how many jobs match in all."""
        arguments.number("limit", limit, low=1, high=1_000_000, hint=f"Pass limit={BOARD_LIMIT}.")
        db = ReadOnlyStateDB.open(target)
        if db is None:
            return [], 0
        try:
            jobs, total = db.board_jobs(limit, board.states_for(choice), q)
            return board.board_rows(jobs, db.attempts_by_job([j["id"] for j in jobs])), total
        finally:
            db.close()

    @app.exception_handler(SpotfitError)
    async def spotfit_error(request: Request, err: SpotfitError) -> Response:
        code = (404 if isinstance(err, NotFoundError) else 413 if isinstance(err, planning.TooLarge)
                else 503 if isinstance(err, Stopped) else 400)
        if request.url.path.startswith("/api/"):
            return _json({"error": err.message, "hint": err.hint}, code)
        return templates.TemplateResponse(request, "error.html", {"error": err}, status_code=code)

    # -- pages --------------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    def jobs_page(request: Request, state: str = "all", q: str = "", limit: int = BOARD_LIMIT) -> HTMLResponse:
        state = state if state in board.STATE_FILTERS else "all"
        rows, total = board_rows(limit, state, q)
        return page(request, "jobs.html", rows=rows, total=total, state=state, q=q, limit=limit,
                    states=board.STATE_FILTERS, where=display_target(target))

    @app.get("/rows", response_class=HTMLResponse)
    def jobs_rows(request: Request, state: str = "all", q: str = "", limit: int = BOARD_LIMIT) -> HTMLResponse:
        state = state if state in board.STATE_FILTERS else "all"
        rows, total = board_rows(limit, state, q)
        return page(request, "_job_rows.html", rows=rows, total=total, state=state, q=q)

    @app.get("/jobs/{ref}", response_class=HTMLResponse)
    def one_job(request: Request, ref: str) -> HTMLResponse:
        with reading():
            return page(request, "job.html", **job_page(ref, costs))

    @app.get("/jobs/{ref}/live")
    def one_job_live(request: Request, ref: str) -> Response:
        """The job page's news: its figures and its tables (HTML), without a reload."""
        with reading():
            doc = job_page(ref, costs)
        sections = {name: templates.get_template(f"_job_{name}.html").render(**doc, request=request)
                    for name in ("summary", "ledger", "rules", "events")}
        return _json({"active": doc["active"], "figures": doc["figures"], "html": sections,
                      "log_tail": doc["log_tail"], "pending": doc["cost"]["pending"]})

    @app.get("/jobs/{ref}/hindsight")
    def one_job_hindsight(request: Request, ref: str) -> Response:
        """The summary and the ledger with the hindsight figures (the first time, after the policies' replay)."""
        with reading():
            doc = with_hindsight(ref, costs)
        return _json({"html": {name: templates.get_template(f"_job_{name}.html").render(**doc, request=request)
                               for name in ("summary", "ledger")}})

    @app.post("/jobs/{ref}/tensorboard")
    def start_tensorboard(ref: str) -> Response:
        with reading() as db:
            job = sdk.find_job(db, ref)
        return RedirectResponse(tensorboards.start(job["id"], job["store_url"]), status_code=303)

    @app.api_route("/jobs/{job_id}/tensorboard/{path:path}", methods=["GET", "HEAD", "POST"])
    async def tensorboard(request: Request, job_id: str, path: str) -> Response:
        """The job's TensorBoard, through the proxy (started by the POST above)."""
        sock = tensorboards.socket_for(job_id)
        if sock is None:
            raise NotFoundError(f"No TensorBoard runs here for job {job_id!r}.",
                                hint="Press Open TensorBoard on the job's page to start it.")
        try:
            return await tensorboard_proxy.forward(request, sock, prefix(job_id), path)
        except httpx.HTTPError:
            return PlainTextResponse(f"502: the TensorBoard of job {job_id} did not answer.", status_code=502)

    def plan_page_of(request: Request, doc: dict | None, **form: Any) -> HTMLResponse:
        figure = charts.plan_figure(doc) if doc else None
        return page(request, "plan.html", plan=doc, figures={"plan": figure} if figure else {},
                    **{"content": "", "job": "", "trace": "", **form})

    def job_plan(job: str, trace: str | None) -> dict:
        with reading() as db:
            return planning.plan_job(sdk.find_job(db, job), trace)

    @app.get("/plan", response_class=HTMLResponse)
    async def plan_page(request: Request, job: str = "", trace: str = "", spec: str | None = None) -> HTMLResponse:
        if spec is not None:
            raise _no_paths()
        doc = await planning.bounded(request, job_plan, job, trace or None) if job else None
        return plan_page_of(request, doc, job=job, trace=trace)

    @app.post("/plan", response_class=HTMLResponse)
    async def plan_posted(request: Request) -> HTMLResponse:
        content, trace = await planning.read_form(request)
        doc = await planning.bounded(request, planning.plan_content, content.encode(), trace or None)
        return plan_page_of(request, doc, content=content, trace=trace or "")

    def spend(since: str, by: str) -> dict:
        """`spotfit cost --all`'s document: ended jobs' kept documents, live jobs' computed (controller/cost_doc.py)."""
        db = ReadOnlyStateDB.open(target)
        if db is None:  # no job has run with this state yet
            return sdk.cost_all(since, by, jobs=[])
        try:
            with sdk.reading_from(db):
                return sdk.cost_all(since, by)
        finally:
            db.close()

    @app.get("/costs", response_class=HTMLResponse)
    def costs_page(request: Request, since: str = "30d", by: str = "project") -> HTMLResponse:
        doc = spend(since, by)
        return page(request, "costs.html", spend=doc, figures={"spend": charts.spend_figure(doc)})

    @app.get("/sweeps", response_class=HTMLResponse)
    def sweeps_page(request: Request) -> HTMLResponse:
        with reading_sweeps() as dbs:
            rows = [sweepview.list_row(row, doc) for row, doc in sweepview.leaderboards(*dbs)] if dbs else []
        return page(request, "sweeps.html", sweeps=rows)

    def sweep_page(ref: str) -> dict:
        with reading_sweeps() as dbs:
            if dbs is None:
                raise _no_sweeps_yet(ref)
            return sweepview.page(*dbs, ref)

    @app.get("/sweeps/{ref}", response_class=HTMLResponse)
    def one_sweep(request: Request, ref: str) -> HTMLResponse:
        return page(request, "sweep.html", **sweep_page(ref))

    @app.get("/sweeps/{ref}/live")
    def one_sweep_live(request: Request, ref: str) -> Response:
        """The sweep page's news: its figures, its summary and its trials table (HTML), without a reload."""
        doc = sweep_page(ref)
        sections = {f"sweep-{name}": templates.get_template(f"_sweep_{name}.html").render(**doc, request=request)
                    for name in ("summary", "trials")}
        return _json({"active": doc["active"], "figures": doc["figures"], "html": sections})

    @app.get("/static/plotly.min.js")
    def plotly() -> FileResponse:
        return FileResponse(plotly_js(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    @app.get("/static/{name}")
    def static(name: str) -> FileResponse:
        path = HERE / "static" / name
        if name not in {"ui.js", "ui.css"}:
            raise NotFoundError(f"No static file {name!r}.", hint="The dashboard serves ui.js and ui.css.")
        return FileResponse(path)

    # -- the JSON API: the CLI's documents --------------------------------------------------

    @app.get("/api/jobs")
    def api_jobs(limit: int = 50) -> Response:
        db = ReadOnlyStateDB.open(target)
        if db is None:
            return _json([])
        try:
            with sdk.reading_from(db):
                return _json(sdk.list_jobs(limit))
        finally:
            db.close()

    @app.get("/api/board")
    def api_board(state: str = "all", q: str = "", limit: int = BOARD_LIMIT) -> Response:
        state = state if state in board.STATE_FILTERS else "all"
        rows, total = board_rows(limit, state, q)
        return _json({"rows": rows, "matching": total, "at": time.time()})

    @app.get("/api/jobs/{ref}")
    def api_status(ref: str) -> Response:
        with reading():
            return _json(sdk.status(ref))

    @app.get("/api/jobs/{ref}/cost")
    def api_cost(ref: str) -> Response:
        with reading():
            return _json(sdk.cost(ref))

    @app.get("/api/jobs/{ref}/logs")
    def api_logs(ref: str, attempt: int | None = None) -> Response:
        with reading():
            return _json(sdk.logs(ref, attempt))

    @app.get("/api/costs")
    def api_costs(since: str = "30d", by: str = "project") -> Response:
        return _json(spend(since, by))

    @app.get("/metrics")
    def prometheus_metrics() -> Response:
        from spotfit import metrics

        return Response(metrics.exposition(lambda: ReadOnlyStateDB.open(target)),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/api/sweeps")
    def api_sweeps() -> Response:
        with reading_sweeps() as dbs:
            return _json([doc for _, doc in sweepview.leaderboards(*dbs)] if dbs else [])

    @app.get("/api/sweeps/{ref}")
    def api_sweep(ref: str) -> Response:
        with reading_sweeps() as dbs:
            if dbs is None:
                raise _no_sweeps_yet(ref)
            return _json(sweepview.leaderboard(*dbs, ref))

    @app.get("/api/plan")
    async def api_plan_job(request: Request, job: str | None = None, trace: str | None = None,
                           spec: str | None = None) -> Response:
        if spec is not None or job is None:
            raise _no_paths()
        return _json(await planning.bounded(request, job_plan, job, trace))

    @app.post("/api/plan")
    async def api_plan(request: Request, trace: str | None = None) -> Response:
        content = await planning.read_body(request, planning.MAX_SPEC_BYTES)
        return _json(await planning.bounded(request, planning.plan_content, content, trace))

    return SecurityHeaders(TokenGate(CsrfGuard(app, token), token))


def _json(doc: Any, status_code: int = 200) -> Response:
    """`doc` serialised exactly as the CLI's `--json` does (`print_json`: dates as strings)."""
    return Response(json.dumps(doc, indent=2, default=str), status_code=status_code, media_type="application/json")


def _no_paths() -> UsageError:
    return UsageError("The dashboard plans a spec's content or a job it knows, never a path: `spec=` is not taken.",
                      hint="POST the spec's YAML to /api/plan (or paste it on the Plan page), or pass job=JOB.")


def _no_sweeps_yet(ref: str) -> NotFoundError:
    return NotFoundError(f"No sweep matches {ref!r}: no sweep has run with this SPOTFIT_HOME yet.",
                         hint="Start one with `spotfit sweep SWEEP.yaml`.")


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.4f}" if abs(value) < 10 else f"${value:,.2f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%"


def _when(epoch_s: float | None) -> str:
    return "–" if epoch_s is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_s))
