"""Which state the verbs read: the state DB of this context, and the job a reference names.

`reading_from` lets the dashboard answer the verbs from its own read-only connection; every
other caller gets `$SPOTFIT_STATE_URL` or the home's state DB.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from spotfit.core import arguments
from spotfit.errors import NotFoundError
from spotfit.host.home import state_target
from spotfit.state.db import StateDB
from spotfit.state.records import JobRecord

_READING: ContextVar[StateDB | None] = ContextVar("spotfit_state_db", default=None)


def db() -> StateDB:
    """The state DB: the one `reading_from` set for this context, else `$SPOTFIT_STATE_URL` (a team's
    PostgreSQL, a file on a volume), else the home's."""
    chosen = _READING.get()
    return chosen if chosen is not None else StateDB(state_target())


@contextmanager
def reading_from(state_db: StateDB) -> Iterator[StateDB]:
    """Answer the verbs called in this block from `state_db` (the dashboard's read-only connection)."""
    token = _READING.set(state_db)
    try:
        yield state_db
    finally:
        _READING.reset(token)


def find_job(state_db: StateDB, ref: str | None) -> JobRecord:
    """The job `ref` (an id, id prefix or name) names; the newest job when `ref` is None."""
    if ref is not None:
        return state_db.find_job(arguments.job_ref(ref))
    jobs = state_db.list_jobs(1)
    if not jobs:
        raise NotFoundError("No jobs yet: nothing to show.", hint="Run one with `spotfit run JOB.yaml`.")
    return jobs[0]


def controller_alive(job: JobRecord, state_db: StateDB | None = None) -> bool:
    """Whether a controller holds the job's lease now (on this host: its process is alive)."""
    return (state_db or db()).lease_live(job)


def live_controllers(within_s: float = 60.0) -> list[dict[str, Any]]:
    """The long-running `spotfit controller`s seen on this state in the last `within_s` seconds."""
    return db().live_controllers(within_s)

