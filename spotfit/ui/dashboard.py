"""What every route of the dashboard shares (`Site`): the state it reads, the templates, the caches.

The routes are added by page family (`ui/routes_jobs.py`, `routes_plan.py`, `routes_spend.py`,
`routes_api.py`), each made from one `Site`; `ui/app.py` puts them together. Every read goes through
a read-only connection of its own (`ReadOnlyStateDB`, `ReadOnlySweepDB`), opened and closed in the
thread Starlette runs the route in.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from spotfit import sdk
from spotfit.core import arguments
from spotfit.errors import NotFoundError, UsageError
from spotfit.host.home import home
from spotfit.state.states import JobState
from spotfit.sweep.store import sweeps_target
from spotfit.ui import board, planning
from spotfit.ui.guard import csrf_token
from spotfit.ui.jobpage import CostCache
from spotfit.ui.readonly import ReadOnlyStateDB, ReadOnlySweepDB
from spotfit.ui.tensorboards import TensorBoards

HERE = Path(__file__).resolve().parent
POLL_MS = 2000  # how often an open page asks for news
# Jobs on the board's first page, newest first; "show more" adds as many (`?limit=N`). What the first
# render costs grows with it: each row is a ledger on the server and some 40 DOM nodes in the browser.
BOARD_LIMIT = 50


def plotly_js() -> Path:
    """plotly.js as the `plotly` package ships it: served from here, nothing fetched from the web."""
    return Path(str(files("plotly") / "package_data" / "plotly.min.js"))


class Site:
    """The dashboard over the state DB at `target` (a SQLite path or a `postgresql://` URL), behind `token`."""

    def __init__(self, target: str | Path, token: str):
        self.target = target
        self.tensorboards = TensorBoards(home() / "cache" / "tensorboard")  # `spotfit tensorboard`'s cache
        self.costs = CostCache()
        self.templates = Jinja2Templates(directory=HERE / "templates")
        env = self.templates.env
        env.trim_blocks = env.lstrip_blocks = True  # a thousand rows, not a thousand blank lines
        env.filters.update(usd=_usd, when=_when, pct=_pct)
        env.globals.update(poll_ms=POLL_MS, page_rows=BOARD_LIMIT, terminal=lambda s: JobState(s).is_terminal(),
                           csrf=csrf_token(token), traces=planning.TRACES)

    @contextmanager
    def reading(self) -> Iterator[ReadOnlyStateDB]:
        """The state DB, read-only, handed to the SDK for the request."""
        with _handed(ReadOnlyStateDB(self.target)) as db:
            yield db

    @contextmanager
    def reading_if_any(self) -> Iterator[ReadOnlyStateDB | None]:
        """As `reading`, or None where no job has run with this state yet (a page shows nothing, not an error)."""
        db = ReadOnlyStateDB.open(self.target)
        if db is None:
            yield None
            return
        with _handed(db):
            yield db

    @contextmanager
    def reading_sweeps(self) -> Iterator[tuple[ReadOnlySweepDB, ReadOnlyStateDB] | None]:
        """The sweep DB and the state DB, read-only; None where no sweep has run with this state yet."""
        sweeps = ReadOnlySweepDB.open(sweeps_target(self.target))  # where the sweep controller keeps it
        if sweeps is None:
            yield None
            return
        try:
            with self.reading() as jobs:
                yield sweeps, jobs
        finally:
            sweeps.close()

    def page(self, request: Request, name: str, **context: Any) -> HTMLResponse:
        return self.templates.TemplateResponse(request, name, context)

    def render(self, request: Request, name: str, doc: dict[str, Any]) -> str:
        """A template's HTML for a page's news (a section redrawn without a reload)."""
        return self.templates.get_template(name).render(**doc, request=request)

    def board_rows(self, limit: int, choice: str, q: str) -> tuple[list[dict], int]:
        """The board's rows (newest `limit` matching jobs) and how many jobs match in all."""
        arguments.number("limit", limit, low=1, high=1_000_000, hint=f"Pass limit={BOARD_LIMIT}.")
        with self.reading_if_any() as db:
            if db is None:
                return [], 0
            jobs, total = db.board_jobs(limit, board.states_for(choice), q)
            return board.board_rows(jobs, db.attempts_by_job([j["id"] for j in jobs])), total

    def spend(self, since: str, by: str) -> dict:
        """`spotfit cost --all`'s document: ended jobs' kept documents, live jobs' computed (controller/cost_doc.py)."""
        with self.reading_if_any() as db:
            return sdk.cost_all(since, by, jobs=[] if db is None else None)

    def job_plan(self, job: str, trace: str | None) -> dict:
        """`spotfit plan` of a job's recorded spec."""
        with self.reading() as db:
            return planning.plan_job(sdk.find_job(db, job), trace)


@contextmanager
def _handed(db: ReadOnlyStateDB) -> Iterator[ReadOnlyStateDB]:
    """`db` handed to the SDK for the request, and closed after it."""
    try:
        with sdk.reading_from(db):
            yield db
    finally:
        db.close()


def as_json(doc: Any, status_code: int = 200) -> Response:
    """`doc` serialised exactly as the CLI's `--json` does (`print_json`: dates as strings)."""
    return Response(json.dumps(doc, indent=2, default=str), status_code=status_code, media_type="application/json")


def no_paths() -> UsageError:
    return UsageError("The dashboard plans a spec's content or a job it knows, never a path: `spec=` is not taken.",
                      hint="POST the spec's YAML to /api/plan (or paste it on the Plan page), or pass job=JOB.")


def no_sweeps_yet(ref: str) -> NotFoundError:
    return NotFoundError(f"No sweep matches {ref!r}: no sweep has run with this SPOTFIT_HOME yet.",
                         hint="Start one with `spotfit sweep SWEEP.yaml`.")


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.4f}" if abs(value) < 10 else f"${value:,.2f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%"


def _when(epoch_s: float | None) -> str:
    return "–" if epoch_s is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_s))
