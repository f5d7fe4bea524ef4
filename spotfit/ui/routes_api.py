"""The JSON API (`/api/...`: the very documents the CLI's `--json` prints) and `/metrics`."""

from __future__ import annotations

import time

from fastapi import FastAPI, Request
from fastapi.responses import Response

from spotfit import sdk
from spotfit.ui import board, planning, sweepview
from spotfit.ui.dashboard import BOARD_LIMIT, Site, as_json, no_paths, no_sweeps_yet
from spotfit.ui.readonly import ReadOnlyStateDB


def add(app: FastAPI, site: Site) -> None:
    """This family's routes, on `app` (its own router: the routes stay plain `APIRoute`s)."""
    routes = app.router

    @routes.get("/api/jobs")
    def api_jobs(limit: int = 50) -> Response:
        with site.reading_if_any() as db:
            return as_json([] if db is None else sdk.list_jobs(limit))

    @routes.get("/api/board")
    def api_board(state: str = "all", q: str = "", limit: int = BOARD_LIMIT) -> Response:
        state = board.state_filter(state)
        rows, total = site.board_rows(limit, state, q)
        return as_json({"rows": rows, "matching": total, "at": time.time()})

    @routes.get("/api/jobs/{ref}")
    def api_status(ref: str) -> Response:
        with site.reading():
            return as_json(sdk.status(ref))

    @routes.get("/api/jobs/{ref}/cost")
    def api_cost(ref: str) -> Response:
        with site.reading():
            return as_json(sdk.cost(ref))

    @routes.get("/api/jobs/{ref}/logs")
    def api_logs(ref: str, attempt: int | None = None) -> Response:
        with site.reading():
            return as_json(sdk.logs(ref, attempt))

    @routes.get("/api/costs")
    def api_costs(since: str = "30d", by: str = "project") -> Response:
        return as_json(site.spend(since, by))

    @routes.get("/metrics")
    def prometheus_metrics() -> Response:
        from spotfit.controller import metrics

        return Response(metrics.exposition(lambda: ReadOnlyStateDB.open(site.target)),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    @routes.get("/api/sweeps")
    def api_sweeps() -> Response:
        with site.reading_sweeps() as dbs:
            return as_json([doc for _, doc in sweepview.leaderboards(*dbs)] if dbs else [])

    @routes.get("/api/sweeps/{ref}")
    def api_sweep(ref: str) -> Response:
        with site.reading_sweeps() as dbs:
            if dbs is None:
                raise no_sweeps_yet(ref)
            return as_json(sweepview.leaderboard(*dbs, ref))

    @routes.get("/api/plan")
    async def api_plan_job(request: Request, job: str | None = None, trace: str | None = None,
                           spec: str | None = None) -> Response:
        if spec is not None or job is None:
            raise no_paths()
        return as_json(await planning.bounded(request, site.job_plan, job, trace))

    @routes.post("/api/plan")
    async def api_plan(request: Request, trace: str | None = None) -> Response:
        content = await planning.read_body(request, planning.MAX_SPEC_BYTES)
        return as_json(await planning.bounded(request, planning.plan_content, content, trace))

