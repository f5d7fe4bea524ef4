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
| `/metrics` | the state's Prometheus metrics (`controller/metrics.py`), as `spotfit controller --metrics-port` does |

Every request reads the state DB (a SQLite file, or a team's PostgreSQL where `SPOTFIT_STATE_URL`
points) through its own read-only connection (`ReadOnlyStateDB`),
handed to the SDK with `sdk.reading_from`, and the sweep DB through another (`ReadOnlySweepDB`).
Routes are plain functions: Starlette runs them in its thread pool, and SQLite connections stay
in the thread that opened them. No route reads a file a request names (`planning.py`); the
middleware around them (`guard.py`, `auth.py`) checks the token, the Origin and the CSRF token,
and adds the security headers. The routes live in routers by page family (`routes_jobs.py`: the
board, a job, its TensorBoard; `routes_spend.py`: plans, costs, sweeps; `routes_api.py`: the JSON
API), over one `Site` (`dashboard.py`: the state they read, the templates, the caches).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp

from spotfit.errors import NotFoundError, SpotfitError
from spotfit.market.stopping import Stopped
from spotfit.ui import planning, routes_api, routes_jobs, routes_spend
from spotfit.ui.auth import TokenGate
from spotfit.ui.dashboard import BOARD_LIMIT, POLL_MS, Site, as_json, plotly_js
from spotfit.ui.guard import CsrfGuard, SecurityHeaders

__all__ = ["BOARD_LIMIT", "POLL_MS", "create_app", "plotly_js"]


def create_app(target: str | Path, token: str) -> ASGIApp:
    """The dashboard over the state DB at `target` (a SQLite path or a `postgresql://` URL), behind `token`."""
    site = Site(target, token)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        site.tensorboards.stop_all()

    app = FastAPI(title="spotfit", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(SpotfitError)
    async def spotfit_error(request: Request, err: SpotfitError) -> Response:
        code = (404 if isinstance(err, NotFoundError) else 413 if isinstance(err, planning.TooLarge)
                else 503 if isinstance(err, Stopped) else 400)
        if request.url.path.startswith("/api/"):
            return as_json({"error": err.message, "hint": err.hint}, code)
        return site.templates.TemplateResponse(request, "error.html", {"error": err}, status_code=code)

    for family in (routes_jobs, routes_spend, routes_api):
        family.add(app, site)
    return SecurityHeaders(TokenGate(CsrfGuard(app, token), token))
