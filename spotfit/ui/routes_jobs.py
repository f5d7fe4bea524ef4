"""The jobs' pages: the board (`/`, `/rows`), a job's page and its news, its TensorBoard, the static files."""

from __future__ import annotations

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse, Response

from spotfit import sdk
from spotfit.errors import NotFoundError
from spotfit.state.dialect import display_target
from spotfit.ui import board, tensorboard_proxy
from spotfit.ui.dashboard import BOARD_LIMIT, HERE, Site, as_json, plotly_js
from spotfit.ui.jobpage import job_page, with_hindsight
from spotfit.ui.tensorboards import prefix


def add(app: FastAPI, site: Site) -> None:
    """This family's routes, on `app` (its own router: the routes stay plain `APIRoute`s)."""
    routes = app.router

    @routes.get("/", response_class=HTMLResponse)
    def jobs_page(request: Request, state: str = "all", q: str = "", limit: int = BOARD_LIMIT) -> HTMLResponse:
        state = board.state_filter(state)
        rows, total = site.board_rows(limit, state, q)
        return site.page(request, "jobs.html", rows=rows, total=total, state=state, q=q, limit=limit,
                         states=board.STATE_FILTERS, where=display_target(site.target))

    @routes.get("/rows", response_class=HTMLResponse)
    def jobs_rows(request: Request, state: str = "all", q: str = "", limit: int = BOARD_LIMIT) -> HTMLResponse:
        state = board.state_filter(state)
        rows, total = site.board_rows(limit, state, q)
        return site.page(request, "_job_rows.html", rows=rows, total=total, state=state, q=q)

    @routes.get("/jobs/{ref}", response_class=HTMLResponse)
    def one_job(request: Request, ref: str) -> HTMLResponse:
        with site.reading():
            return site.page(request, "job.html", **job_page(ref, site.costs))

    @routes.get("/jobs/{ref}/live")
    def one_job_live(request: Request, ref: str) -> Response:
        """The job page's news: its figures and its tables (HTML), without a reload."""
        with site.reading():
            doc = job_page(ref, site.costs)
        sections = {name: site.render(request, f"_job_{name}.html", doc)
                    for name in ("summary", "ledger", "rules", "events")}
        return as_json({"active": doc["active"], "figures": doc["figures"], "html": sections,
                        "log_tail": doc["log_tail"], "pending": doc["cost"]["pending"]})

    @routes.get("/jobs/{ref}/hindsight")
    def one_job_hindsight(request: Request, ref: str) -> Response:
        """The summary and the ledger with the hindsight figures (the first time, after the policies' replay)."""
        with site.reading():
            doc = with_hindsight(ref, site.costs)
        return as_json({"html": {name: site.render(request, f"_job_{name}.html", doc)
                                 for name in ("summary", "ledger")}})

    @routes.post("/jobs/{ref}/tensorboard")
    def start_tensorboard(ref: str) -> Response:
        with site.reading() as db:
            job = sdk.find_job(db, ref)
        return RedirectResponse(site.tensorboards.start(job["id"], job["store_url"]), status_code=303)

    @routes.api_route("/jobs/{job_id}/tensorboard/{path:path}", methods=["GET", "HEAD", "POST"])
    async def tensorboard(request: Request, job_id: str, path: str) -> Response:
        """The job's TensorBoard, through the proxy (started by the POST above)."""
        sock = site.tensorboards.socket_for(job_id)
        if sock is None:
            raise NotFoundError(f"No TensorBoard runs here for job {job_id!r}.",
                                hint="Press Open TensorBoard on the job's page to start it.")
        try:
            return await tensorboard_proxy.forward(request, sock, prefix(job_id), path)
        except httpx.HTTPError:
            return PlainTextResponse(f"502: the TensorBoard of job {job_id} did not answer.", status_code=502)

    @routes.get("/static/plotly.min.js")
    def plotly() -> FileResponse:
        return FileResponse(plotly_js(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    @routes.get("/static/{name}")
    def static(name: str) -> FileResponse:
        path = HERE / "static" / name
        if name not in {"ui.js", "ui.css"}:
            raise NotFoundError(f"No static file {name!r}.", hint="The dashboard serves ui.js and ui.css.")
        return FileResponse(path)

