"""The pages of plans, costs and sweeps: `/plan` (a spec's content or a job's), `/costs`, `/sweeps`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from spotfit.ui import charts, planning, sweepview
from spotfit.ui.dashboard import Site, as_json, no_paths, no_sweeps_yet


def add(app: FastAPI, site: Site) -> None:
    """This family's routes, on `app` (its own router: the routes stay plain `APIRoute`s)."""
    routes = app.router

    def plan_page_of(request: Request, doc: dict | None, **form: Any) -> HTMLResponse:
        figure = charts.plan_figure(doc) if doc else None
        return site.page(request, "plan.html", plan=doc, figures={"plan": figure} if figure else {},
                         **{"content": "", "job": "", "trace": "", **form})

    @routes.get("/plan", response_class=HTMLResponse)
    async def plan_page(request: Request, job: str = "", trace: str = "", spec: str | None = None) -> HTMLResponse:
        if spec is not None:
            raise no_paths()
        doc = await planning.bounded(request, site.job_plan, job, trace or None) if job else None
        return plan_page_of(request, doc, job=job, trace=trace)

    @routes.post("/plan", response_class=HTMLResponse)
    async def plan_posted(request: Request) -> HTMLResponse:
        content, trace = await planning.read_form(request)
        doc = await planning.bounded(request, planning.plan_content, content.encode(), trace or None)
        return plan_page_of(request, doc, content=content, trace=trace or "")

    @routes.get("/costs", response_class=HTMLResponse)
    def costs_page(request: Request, since: str = "30d", by: str = "project") -> HTMLResponse:
        doc = site.spend(since, by)
        return site.page(request, "costs.html", spend=doc, figures={"spend": charts.spend_figure(doc)})

    @routes.get("/sweeps", response_class=HTMLResponse)
    def sweeps_page(request: Request) -> HTMLResponse:
        with site.reading_sweeps() as dbs:
            rows = [sweepview.list_row(row, doc) for row, doc in sweepview.leaderboards(*dbs)] if dbs else []
        return site.page(request, "sweeps.html", sweeps=rows)

    def sweep_page(ref: str) -> dict:
        with site.reading_sweeps() as dbs:
            if dbs is None:
                raise no_sweeps_yet(ref)
            return sweepview.page(*dbs, ref)

    @routes.get("/sweeps/{ref}", response_class=HTMLResponse)
    def one_sweep(request: Request, ref: str) -> HTMLResponse:
        return site.page(request, "sweep.html", **sweep_page(ref))

    @routes.get("/sweeps/{ref}/live")
    def one_sweep_live(request: Request, ref: str) -> Response:
        """The sweep page's news: its figures, its summary and its trials table (HTML), without a reload."""
        doc = sweep_page(ref)
        sections = {f"sweep-{name}": site.render(request, f"_sweep_{name}.html", doc)
                    for name in ("summary", "trials")}
        return as_json({"active": doc["active"], "figures": doc["figures"], "html": sections})

