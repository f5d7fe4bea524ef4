"""The sweep bookkeeping: sweeps, their trials (each linked to a job) and batches.

It lives where the job state lives (`home.state_target()`): beside a SQLite state DB, in its
own file `sweeps.db` (default `$SPOTFIT_HOME/sweeps.db`), or in the same PostgreSQL database
when `SPOTFIT_STATE_URL` points there. Jobs stay ordinary jobs, and a trial row links an
Optuna trial number to the job that runs it; Optuna keeps its own study beside it
(`study.storage_url`). The SQL goes through the state's dialect layer (`state/dialect.py`):
short write transactions, so a sweep controller and a `spotfit cancel` may write at once.

A sweep has a lease, as a job does (`spotfit/state/lease.py`): the one sweep controller that drives it.

Example:

>>> import tempfile, os
>>> db = SweepDB(os.path.join(tempfile.mkdtemp(), "sweeps.db"))
>>> db.create_sweep("digits-sweep-ab12", "digits", "{}")
>>> db.add_trial("digits-sweep-ab12", 0, {"lr": 0.01})
>>> [(t["number"], t["state"], t["params"]) for t in db.trials("digits-sweep-ab12")]
[(0, 'creating', {'lr': 0.01})]
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from spotfit.core import arguments
from spotfit.errors import NotFoundError
from spotfit.host.home import state_target
from spotfit.state import lease
from spotfit.state.db import RELEASE_QUEUED_SQL
from spotfit.state.dialect import Postgres, Sqlite, connect, display_target, execute, execute_schema, is_postgres

# The tables share a PostgreSQL schema with the job state and with Optuna's own tables (which
# include `trials`): hence `sweep_trials` and `batch_jobs`.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    options_json TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL DEFAULT 'running',
    message TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_expires_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS sweep_trials (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    number INTEGER NOT NULL,
    job_id TEXT,
    state TEXT NOT NULL DEFAULT 'creating',
    params_json TEXT NOT NULL,
    value REAL,
    rung INTEGER NOT NULL DEFAULT 0,
    events_seen INTEGER NOT NULL DEFAULT 0,
    promotions INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sweep_id, number)
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    parallel INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'running',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_expires_at REAL
);
CREATE TABLE IF NOT EXISTS batch_jobs (
    batch_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    started_at REAL,
    controller_pid INTEGER,
    PRIMARY KEY (batch_id, job_id)
)
"""

# A `sweeps.db` of the first sweep release (SQLite only): before the leases and the batch queue's records.
_FROM_FIRST_RELEASE = """
ALTER TABLE trials RENAME TO sweep_trials;
ALTER TABLE batches RENAME TO batch_jobs;
ALTER TABLE batch_jobs ADD COLUMN started_at REAL;
ALTER TABLE batch_jobs ADD COLUMN controller_pid INTEGER;
ALTER TABLE sweeps ADD COLUMN lease_owner TEXT;
ALTER TABLE sweeps ADD COLUMN lease_expires_at REAL
"""


def sweeps_target(state: str | Path | None = None) -> str:
    """Where the sweep DB is: the state's PostgreSQL URL, else `sweeps.db` beside the state DB file
    (`state`: where the job state lives, `home.state_target()` by default).

    >>> import os
    >>> os.environ["SPOTFIT_STATE_URL"] = "sqlite:////var/lib/spotfit/state.db"
    >>> sweeps_target()
    '/var/lib/spotfit/sweeps.db'
    >>> del os.environ["SPOTFIT_STATE_URL"]
    """
    state = state_target() if state is None else str(state)
    return state if is_postgres(state) else str(Path(state).parent / "sweeps.db")


def open_existing() -> SweepDB | None:
    """The sweep DB, or None where no sweep or batch has been recorded yet (no `sweeps.db`: none is created)."""
    target = sweeps_target()
    return SweepDB(target) if is_postgres(target) or Path(target).is_file() else None


class SweepDB:
    """The sweep database; one per process (connections are not shared).

    `target` is a SQLite file path or a `postgresql://` URL (`sweeps_target()` picks it).
    """

    def __init__(self, target: str | Path):
        self.path = display_target(target)
        self._db: Sqlite | Postgres = connect(target)
        self.dialect = self._db.name
        with self._db.transaction():
            self._db.lock_schema()  # PostgreSQL: two processes creating the tables at once take turns
            if self._db.name == "sqlite" and self._q(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'trials'").fetchone():
                for statement in filter(str.strip, _FROM_FIRST_RELEASE.split(";")):
                    self._q(statement)
            execute_schema(self._db, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def _q(self, text: str, params: tuple[Any, ...] = ()) -> Any:
        return execute(self._db, text, params)

    # sweeps -------------------------------------------------------------------------------

    def create_sweep(self, sweep_id: str, name: str, spec_json: str, options: dict[str, Any] | None = None) -> None:
        """Record a sweep; `options` are the command line's (`--preempt-at`), kept for `resume`."""
        now = time.time()
        with self._db.transaction():
            self._q("INSERT INTO sweeps (id, name, spec_json, options_json, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)", (sweep_id, name, spec_json, json.dumps(options or {}), now, now))

    def find_sweep(self, ref: str) -> dict[str, Any] | None:
        """The sweep `ref` names (id, id prefix or name: the newest), or None."""
        ref = arguments.text("SWEEP", ref, hint="`spotfit list` shows the sweeps.",
                             expected="a sweep id, an id prefix or a sweep name")
        rows = self._q(
            "SELECT * FROM sweeps WHERE id = ? OR name = ? OR substr(id, 1, ?) = ? ORDER BY created_at DESC",
            (ref, ref, len(ref), ref)).fetchall()
        exact = [r for r in rows if r["id"] == ref] or [r for r in rows if r["name"] == ref]
        if exact:
            return dict(exact[0])
        if len(rows) > 1:
            matches = ", ".join(r["id"] for r in rows[:5])
            raise NotFoundError(f"Sweep prefix {ref!r} is ambiguous: it matches {matches}.",
                                hint="Give more of the sweep id.")
        return dict(rows[0]) if rows else None

    def get_sweep(self, ref: str) -> dict[str, Any]:
        found = self.find_sweep(ref)
        if found is None:
            raise NotFoundError(f"No sweep matches {ref!r}: expected a sweep id, an id prefix or a name.",
                                hint="`spotfit list` shows the sweeps and their trials.")
        return found

    def list_sweeps(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._q("SELECT * FROM sweeps ORDER BY created_at DESC").fetchall()]

    def update_sweep(self, sweep_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._db.transaction():
            self._q(f"UPDATE sweeps SET {cols} WHERE id = ?", (*fields.values(), sweep_id))

    # trials -------------------------------------------------------------------------------

    def add_trial(self, sweep_id: str, number: int, params: dict[str, Any]) -> None:
        with self._db.transaction():
            self._q("INSERT INTO sweep_trials (sweep_id, number, params_json) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    (sweep_id, number, json.dumps(params)))

    def update_trial(self, sweep_id: str, number: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._db.transaction():
            self._q(f"UPDATE sweep_trials SET {cols} WHERE sweep_id = ? AND number = ?",
                    (*fields.values(), sweep_id, number))

    def trials(self, sweep_id: str) -> list[dict[str, Any]]:
        rows = self._q("SELECT * FROM sweep_trials WHERE sweep_id = ? ORDER BY number", (sweep_id,)).fetchall()
        return [{**{k: v for k, v in dict(r).items() if k != "params_json"}, "params": json.loads(r["params_json"])}
                for r in rows]

    def group_of(self) -> dict[str, str]:
        """job id -> the sweep or batch it belongs to (`spotfit list`)."""
        groups = {r["job_id"]: r["batch_id"] for r in self._q("SELECT job_id, batch_id FROM batch_jobs").fetchall()}
        groups.update({r["job_id"]: r["sweep_id"] for r in self._q(
            "SELECT job_id, sweep_id FROM sweep_trials WHERE job_id IS NOT NULL").fetchall()})
        return groups

    # batches ------------------------------------------------------------------------------

    def add_batch(self, batch_id: str, job_ids: list[str], parallel: int) -> None:
        """Record a batch: its jobs, in order, queued; at most `parallel` of them run at once."""
        now = time.time()
        with self._db.transaction():
            self._q("INSERT INTO batches (id, parallel, created_at, updated_at) VALUES (?, ?, ?, ?)",
                    (batch_id, parallel, now, now))
            for position, job_id in enumerate(job_ids):
                self._q("INSERT INTO batch_jobs (batch_id, job_id, position) VALUES (?, ?, ?)",
                        (batch_id, job_id, position))

    def get_batch(self, batch_id: str) -> dict[str, Any]:
        row = self._q("SELECT * FROM batches WHERE id = ?", (batch_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"No batch {batch_id!r}: expected a batch id (batch-YYYYmmdd-HHMMSS-xxxx).",
                                hint="`spotfit list` shows each job's batch.")
        return dict(row)

    def update_batch(self, batch_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._db.transaction():
            self._q(f"UPDATE batches SET {cols} WHERE id = ?", (*fields.values(), batch_id))

    def batch_jobs(self, batch_id: str) -> list[dict[str, Any]]:
        """The batch's jobs in order: job_id, started_at (None while queued), controller_pid."""
        rows = self._q("SELECT job_id, started_at, controller_pid FROM batch_jobs WHERE batch_id = ? "
                       "ORDER BY position", (batch_id,)).fetchall()
        return [dict(r) for r in rows]

    def batch_job_started(self, batch_id: str, job_id: str, controller_pid: int | None) -> None:
        with self._db.transaction():
            self._q("UPDATE batch_jobs SET started_at = ?, controller_pid = ? WHERE batch_id = ? AND job_id = ?",
                    (time.time(), controller_pid, batch_id, job_id))

    def release_queued(self, batch_id: str, job_id: str, message: str) -> bool:
        """PostgreSQL, where the jobs table is in this database too: the queued job becomes pending
        and its hand-over is recorded, in one transaction; False when it was no longer queued."""
        if self.dialect != "postgresql":
            raise ValueError("the job state is in another SQLite file: release it there (StateDB.release_queued)")
        with self._db.transaction():
            if not self._q(RELEASE_QUEUED_SQL, (message, time.time(), job_id)).rowcount:
                return False
            self._q("UPDATE batch_jobs SET started_at = ?, controller_pid = NULL WHERE batch_id = ? AND job_id = ?",
                    (time.time(), batch_id, job_id))
            return True

    def batch(self, batch_id: str) -> list[str]:
        return [r["job_id"] for r in self.batch_jobs(batch_id)]

    # leases of sweep controllers and batch queues (`spotfit/state/lease.py`, as a job's) -------------

    def claim_lease(self, table: str, row_id: str, holder: lease.Holder, ttl_s: float) -> bool:
        """Make `holder` the one process driving the sweep or batch `row_id`, unless another live one is."""
        with self._db.transaction():
            row = self._q(f"SELECT lease_owner, lease_expires_at FROM {_leased(table)} WHERE id = ?"
                          + self._db.for_update, (row_id,)).fetchone()
            now = self._db.now()
            if row is None or lease.held_by_other(row["lease_owner"], row["lease_expires_at"], now, holder):
                return False
            self._q(f"UPDATE {_leased(table)} SET lease_owner = ?, lease_expires_at = ?, updated_at = ? WHERE id = ?",
                    (holder.key, now + ttl_s, time.time(), row_id))
            return True

    def renew_lease(self, table: str, row_id: str, holder: lease.Holder, ttl_s: float) -> None:
        """The heartbeat; `LeaseLost` when another process holds the lease now."""
        with self._db.transaction():
            cursor = self._q(f"UPDATE {_leased(table)} SET lease_expires_at = ? WHERE id = ? AND lease_owner = ?",
                             (self._db.now() + ttl_s, row_id, holder.key))
        if cursor.rowcount == 0:
            raise lease.LeaseLost(f"{row_id} is driven by another process now; this one ({holder.key}) stops.",
                                  hint=f"Watch it with `spotfit list` or `spotfit sweep status {row_id}`.")

    def release_lease(self, table: str, row_id: str, holder: lease.Holder) -> None:
        with self._db.transaction():
            self._q(f"UPDATE {_leased(table)} SET lease_owner = NULL, lease_expires_at = NULL "
                    "WHERE id = ? AND lease_owner = ?", (row_id, holder.key))

    def lease_live(self, row: dict[str, Any]) -> bool:
        """Whether a live process holds the lease of `row` (a sweep or a batch) now."""
        nobody = lease.Holder(lease.this_host(), -1, "")
        return lease.held_by_other(row.get("lease_owner"), row.get("lease_expires_at"), self._db.now(), nobody)


def _leased(table: str) -> str:
    """`table`, checked: the two tables whose rows have a lease (never text from outside)."""
    if table not in ("sweeps", "batches"):
        raise ValueError(f"no lease in table {table!r}")
    return table
