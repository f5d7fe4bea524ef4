"""The dashboard's view of the state DB: a connection SQLite itself holds read-only.

The dashboard reads while controllers write. It opens the database with `mode=ro` (a URI
filename), so no code path of the dashboard, however wrong, can change a job's rows: SQLite
refuses every write with "attempt to write a readonly database". It never migrates: a DB of
an older schema is read as it is, a newer one is refused with the same error `StateDB` gives.

Example:

>>> import os, tempfile
>>> from spotfit.state import StateDB
>>> path = os.path.join(tempfile.mkdtemp(), "state.db")
>>> StateDB(path).create_job("j-1", "j", spec_json="{}", store_url="memory://j")
>>> ro = ReadOnlyStateDB(path)
>>> ro.board_jobs(10)[0]["state"], ro.attempts_by_job(["j-1"])
('pending', {'j-1': []})
>>> ro.update_job("j-1", state="failed")
Traceback (most recent call last):
sqlite3.OperationalError: attempt to write a readonly database
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from spotfit.errors import NotFoundError, SpotfitError
from spotfit.state import SCHEMA_VERSION, StateDB


class ReadOnlyStateDB(StateDB):
    """`StateDB`'s reads over a read-only connection (open one per thread: connections are not shared)."""

    def __init__(self, path: str | Path):  # not StateDB.__init__: it would create the file and migrate
        self.path = str(path)
        if not Path(self.path).is_file():
            raise NotFoundError(f"No state DB at {self.path}: no job has run with this SPOTFIT_HOME yet.",
                                hint="Run a job with `spotfit run JOB.yaml`, or point SPOTFIT_HOME at another home.")
        uri = Path(self.path).resolve().as_uri() + "?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA busy_timeout=30000")
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self._conn.close()
            raise SpotfitError(f"State DB {self.path} has schema version {version}, newer than this spotfit "
                               f"understands ({SCHEMA_VERSION}).",
                               hint="Upgrade spotfit, or point SPOTFIT_HOME at another folder.")

    def board_jobs(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` jobs with the columns the jobs board shows (not their specs: a page of
        a thousand jobs would read a thousand specs)."""
        rows = self._conn.execute(
            "SELECT id, name, state, message, step, total_steps, loss, created_at FROM jobs "
            "ORDER BY created_at DESC LIMIT ?", (limit,)
        ).fetchall()
        return [dict(r) for r in rows]

    def attempts_by_job(self, job_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """The attempts of many jobs in one query (the jobs board), each job's in order."""
        out: dict[str, list[dict[str, Any]]] = {job_id: [] for job_id in job_ids}
        for start in range(0, len(job_ids), 500):  # SQLite caps the number of bound parameters
            chunk = job_ids[start:start + 500]
            rows = self._conn.execute(
                f"SELECT * FROM attempts WHERE job_id IN ({', '.join('?' * len(chunk))}) ORDER BY job_id, number",
                chunk,
            ).fetchall()
            for row in rows:
                attempt = dict(row)
                attempt["info"] = json.loads(attempt.pop("info_json") or "{}")
                out[attempt["job_id"]].append(attempt)
        return out
