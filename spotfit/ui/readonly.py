"""The dashboard's view of the state DB and the sweep DB: connections SQLite itself holds read-only.

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
>>> ro.board_jobs(10)[0][0]["state"], ro.board_jobs(10, states=("running",))[1], ro.attempts_by_job(["j-1"])
('pending', 0, {'j-1': []})
>>> ro.update_job("j-1", state="failed")
Traceback (most recent call last):
sqlite3.OperationalError: attempt to write a readonly database
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spotfit.errors import NotFoundError, SpotfitError
from spotfit.state import SCHEMA_VERSION, StateDB
from spotfit.state_dialect import Sqlite
from spotfit.sweep.store import SweepDB


class ReadOnlyStateDB(StateDB):
    """`StateDB`'s reads over a read-only connection (open one per thread: connections are not shared)."""

    def __init__(self, path: str | Path):  # not StateDB.__init__: it would create the file and migrate
        self.path = str(path)
        if not Path(self.path).is_file():
            raise NotFoundError(f"No state DB at {self.path}: no job has run with this SPOTFIT_HOME yet.",
                                hint="Run a job with `spotfit run JOB.yaml`, or point SPOTFIT_HOME at another home.")
        self._db = Sqlite.read_only(self.path)
        self.dialect, self.IntegrityError = self._db.name, self._db.IntegrityError
        self._conn = self._db.conn
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self._conn.close()
            raise SpotfitError(f"State DB {self.path} has schema version {version}, newer than this spotfit "
                               f"understands ({SCHEMA_VERSION}).",
                               hint="Upgrade spotfit, or point SPOTFIT_HOME at another folder.")

    def board_jobs(self, limit: int, states: tuple[str, ...] | None = None,
                   text: str = "") -> tuple[list[dict[str, Any]], int]:
        """The newest `limit` jobs in `states` (all when None) whose id or name contains `text`
        (any case), with the columns the jobs board shows, and how many match in all.

        Not their specs: a page of a thousand jobs would read a thousand specs.
        """
        where, args = ["1 = 1"], []
        if states is not None:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            args += list(states)
        if text.strip():
            where.append("(instr(lower(id), ?) > 0 OR instr(lower(name), ?) > 0)")
            args += [text.strip().lower()] * 2
        condition = " AND ".join(where)
        total = self._conn.execute(f"SELECT COUNT(*) FROM jobs WHERE {condition}", args).fetchone()[0]
        rows = self._conn.execute(
            "SELECT id, name, state, message, step, total_steps, loss, created_at FROM jobs "
            f"WHERE {condition} ORDER BY created_at DESC LIMIT ?", (*args, limit)
        ).fetchall()
        return [dict(r) for r in rows], int(total)

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


class ReadOnlySweepDB(SweepDB):
    """`SweepDB`'s reads over a read-only connection (`mode=ro`, as `ReadOnlyStateDB`).

    `open` gives None where no sweep has run in this home: no `sweeps.db` means no sweeps yet.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> ReadOnlySweepDB.open(os.path.join(folder, "sweeps.db")) is None
    True
    >>> SweepDB(os.path.join(folder, "sweeps.db")).create_sweep("d-sweep-ab12cd", "d", "{}")
    >>> ro = ReadOnlySweepDB.open(os.path.join(folder, "sweeps.db"))
    >>> [s["id"] for s in ro.list_sweeps()]
    ['d-sweep-ab12cd']
    >>> ro.update_sweep("d-sweep-ab12cd", state="failed")
    Traceback (most recent call last):
    sqlite3.OperationalError: attempt to write a readonly database
    >>> ro.close()
    """

    def __init__(self, path: str | Path):  # not SweepDB.__init__: it would create the file and its tables
        self.path = str(path)
        self._db = Sqlite.read_only(self.path)

    @classmethod
    def open(cls, path: str | Path) -> ReadOnlySweepDB | None:
        return cls(path) if Path(path).is_file() else None
