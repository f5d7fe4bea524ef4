"""The dashboard's view of the state DB and the sweep DB: connections the database itself holds read-only.

The dashboard reads while controllers write, from where the state lives (`home.state_target()`).
A SQLite file is opened with `mode=ro` (a URI filename): SQLite refuses every write with
"attempt to write a readonly database". A team's PostgreSQL (`SPOTFIT_STATE_URL`) is read in a
session whose transactions are all `READ ONLY`: the server refuses every write with
"cannot execute ... in a read-only transaction". So no code path of the dashboard, however
wrong, can change a job's rows. It never migrates: a DB of an older schema is read as it is, a
newer one is refused with the same error `StateDB` gives.

Example:

>>> import os, tempfile
>>> from spotfit.state.db import StateDB
>>> path = os.path.join(tempfile.mkdtemp(), "state.db")
>>> StateDB(path).create_job("j-1", "j", spec_json="{}", store_url="memory://j")
>>> ro = ReadOnlyStateDB(path)
>>> ro.board_jobs(10)[0][0]["state"], ro.board_jobs(10, states=("running",))[1], ro.attempts_by_job(["j-1"])
('pending', 0, {'j-1': []})
>>> from spotfit.state.states import JobState
>>> ro.move_job("j-1", JobState.FAILED, "failed")
Traceback (most recent call last):
sqlite3.OperationalError: attempt to write a readonly database
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from spotfit.errors import NotFoundError, SpotfitError
from spotfit.state.db import StateDB
from spotfit.state.dialect import Postgres, Sqlite, display_target, is_postgres
from spotfit.state.records import AttemptRecord
from spotfit.state.schema import SCHEMA_VERSION
from spotfit.state.wait import WaitPolicy
from spotfit.sweep.store import SweepDB


class ReadOnlyStateDB(StateDB):
    """`StateDB`'s reads over a read-only connection (open one per thread: connections are not shared).

    `target` is where the state lives (`home.state_target()`): a SQLite file, opened `mode=ro`,
    or a `postgresql://` URL, whose session is `READ ONLY` (the server refuses every write).
    `open` gives None where no job has run yet (no file; no `jobs` table on the search path).
    """

    def __init__(self, target: str | Path):  # not StateDB.__init__: it would create the tables and migrate
        self.path = display_target(target)
        found = ReadOnlyStateDB._connect(target)
        if found is None:
            raise NotFoundError(f"No state DB at {self.path}: no job has run with this state yet.",
                                hint="Run a job with `spotfit run JOB.yaml`, or point SPOTFIT_HOME "
                                     "(or SPOTFIT_STATE_URL) at another state.")
        self._db = found
        self.dialect, self.IntegrityError = self._db.name, self._db.IntegrityError
        self.wait_policy, self.waits = WaitPolicy(target=self.path), []  # a write is refused, never waited for
        self.memory = None  # nor kept in memory
        version = self._db.version()
        if version > SCHEMA_VERSION:
            self._db.close()
            raise SpotfitError(f"State DB {self.path} has schema version {version}, newer than this spotfit "
                               f"understands ({SCHEMA_VERSION}).",
                               hint="Upgrade spotfit, or point SPOTFIT_HOME (or SPOTFIT_STATE_URL) elsewhere.")

    @staticmethod
    def _connect(target: str | Path) -> Sqlite | Postgres | None:
        if not is_postgres(target):
            return Sqlite.read_only(target) if Path(target).is_file() else None
        db = Postgres.read_only(str(target))
        if db.has_table("jobs"):
            return db
        db.close()
        return None

    @classmethod
    def open(cls, target: str | Path) -> ReadOnlyStateDB | None:
        """The state at `target`, read-only; None where no job has run yet."""
        try:
            return cls(target)
        except NotFoundError:
            return None

    def board_jobs(self, limit: int, states: tuple[str, ...] | None = None,
                   text: str = "") -> tuple[list[dict[str, Any]], int]:
        """The newest `limit` jobs in `states` (all when None) whose id or name contains `text`
        (any case), with the columns the jobs board shows, and how many match in all.

        Not their specs: a page of a thousand jobs would read a thousand specs.
        """
        where: list[str] = ["1 = 1"]
        args: list[Any] = []
        if states is not None:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            args += list(states)
        if text.strip():
            where.append("(lower(id) LIKE ? ESCAPE '!' OR lower(name) LIKE ? ESCAPE '!')")
            args += [_contains(text.strip().lower())] * 2
        condition = " AND ".join(where)
        total = self._q(f"SELECT COUNT(*) AS n FROM jobs WHERE {condition}", tuple(args)).fetchone()["n"]
        rows = self._q(
            "SELECT id, name, state, message, step, total_steps, loss, created_at FROM jobs "
            f"WHERE {condition} ORDER BY created_at DESC LIMIT ?", (*args, limit)
        ).fetchall()
        return [dict(r) for r in rows], int(total)

    def attempts_by_job(self, job_ids: list[str]) -> dict[str, list[AttemptRecord]]:
        """The attempts of many jobs in one query (the jobs board), each job's in order."""
        out: dict[str, list[AttemptRecord]] = {job_id: [] for job_id in job_ids}
        for start in range(0, len(job_ids), 500):  # SQLite caps the number of bound parameters
            chunk = job_ids[start:start + 500]
            rows = self._q(
                f"SELECT * FROM attempts WHERE job_id IN ({', '.join('?' * len(chunk))}) ORDER BY job_id, number",
                tuple(chunk),
            ).fetchall()
            for row in rows:
                attempt = dict(row)
                attempt["info"] = json.loads(attempt.pop("info_json") or "{}")
                out[attempt["job_id"]].append(cast(AttemptRecord, attempt))
        return out


def _contains(text: str) -> str:
    """A LIKE pattern (escape `!`) matching any value that contains `text` as it is."""
    return "%" + text.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"


class ReadOnlySweepDB(SweepDB):
    """`SweepDB`'s reads over a read-only connection, as `ReadOnlyStateDB`: `target` is where the
    sweeps live (`sweep.store.sweeps_target()`), a `sweeps.db` file opened `mode=ro` or the state's
    PostgreSQL in a `READ ONLY` session.

    `open` gives None where no sweep or batch has been recorded yet (no `sweeps.db`; no `sweeps`
    table on PostgreSQL).

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

    def __init__(self, db: Sqlite | Postgres, target: str | Path):  # not SweepDB.__init__: it creates tables
        self.path = display_target(target)
        self._db = db

    @classmethod
    def open(cls, target: str | Path) -> ReadOnlySweepDB | None:
        if not is_postgres(target):
            return cls(Sqlite.read_only(target), target) if Path(target).is_file() else None
        db = Postgres.read_only(str(target))
        if db.has_table("sweeps"):
            return cls(db, target)
        db.close()
        return None
