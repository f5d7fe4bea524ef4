"""Persistent state in SQLite: jobs, attempts and events.

One database file under `$SPOTFIT_HOME`, in WAL mode so that readers never block the writer;
every write is a short `BEGIN IMMEDIATE` transaction, so two CLI processes (a controller and a
`spotfit cancel` from another shell) can write at once without losing a row. The schema is
versioned with `PRAGMA user_version` and migrated forward on open.

Example:

>>> import tempfile, os
>>> db = StateDB(os.path.join(tempfile.mkdtemp(), "state.db"))
>>> db.create_job("digits-1", "digits", spec_json="{}", store_url="memory://x")
>>> db.get_job("digits-1")["state"]
'pending'
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spotfit.errors import NotFoundError, SpotfitError

SCHEMA_VERSION = 1

_SCHEMA_V1 = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    store_url TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    controller_pid INTEGER,
    controller_seen_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    step INTEGER NOT NULL DEFAULT 0,
    total_steps INTEGER,
    loss REAL,
    clock_origin REAL,
    trace_origin_s REAL,
    trace_now_s REAL NOT NULL DEFAULT 0,
    message TEXT,
    result_json TEXT
);
CREATE TABLE attempts (
    job_id TEXT NOT NULL REFERENCES jobs(id),
    number INTEGER NOT NULL,
    backend TEXT NOT NULL,
    zone TEXT,
    market TEXT NOT NULL,
    state TEXT NOT NULL,
    handle TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    trace_start_s REAL,
    trace_end_s REAL,
    start_step INTEGER,
    end_step INTEGER,
    exit_code INTEGER,
    billed_s REAL,
    cost_usd REAL,
    info_json TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (job_id, number)
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    attempt INTEGER,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    data_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_job ON events(job_id, id);
"""

_MIGRATIONS = {1: _SCHEMA_V1}



class StateDB:
    """The state database; open one per process (connections are not shared)."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock at once (no upgrade deadlocks)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _migrate(self) -> None:
        try:
            self._migrate_in_transaction()
        except SpotfitError:
            self._conn.close()
            raise

    def _migrate_in_transaction(self) -> None:
        with self.transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise SpotfitError(
                    f"State DB {self.path} has schema version {version}, newer than this "
                    f"spotfit understands ({SCHEMA_VERSION}).",
                    hint="Upgrade spotfit, or point SPOTFIT_HOME at another folder.",
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                # One statement at a time: executescript() would commit the transaction.
                for statement in filter(str.strip, _MIGRATIONS[target].split(";")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={target}")

    # jobs ---------------------------------------------------------------------------------

    def create_job(self, job_id: str, name: str, spec_json: str, store_url: str) -> None:
        now = time.time()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs (id, name, spec_json, store_url, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (job_id, name, spec_json, store_url, now, now),
            )

    def get_job(self, job_id: str) -> dict[str, Any]:
        row = self._conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFoundError(
                f"No job {job_id!r} in {self.path}.",
                hint="`spotfit list` shows the known jobs.",
            )
        return dict(row)

    def find_job(self, ref: str) -> dict[str, Any]:
        """A job by id, id prefix, or name (the newest job of that name)."""
        rows = self._conn.execute(
            "SELECT * FROM jobs WHERE id = ? OR name = ? OR substr(id, 1, ?) = ? ORDER BY created_at DESC",
            (ref, ref, len(ref), ref),
        ).fetchall()
        for match in (lambda r: r["id"] == ref, lambda r: r["name"] == ref):
            found = [r for r in rows if match(r)]
            if found:
                return dict(found[0])
        if len(rows) > 1:
            raise NotFoundError(
                f"Job prefix {ref!r} is ambiguous: it matches {', '.join(r['id'] for r in rows[:5])}.",
                hint="Give more of the job id.",
            )
        if not rows:
            raise NotFoundError(
                f"No job matches {ref!r}: expected a job id, an id prefix or a job name.",
                hint="`spotfit list` shows the known jobs.",
            )
        return dict(rows[0])

    def list_jobs(self, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT * FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,)
        ).fetchall()
        return [dict(r) for r in rows]

    def update_job(self, job_id: str, **fields: Any) -> None:
        if not fields:
            return
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as conn:
            conn.execute(f"UPDATE jobs SET {cols} WHERE id = ?", (*fields.values(), job_id))

    def claim_controller(self, job_id: str, pid: int, stale_s: float) -> bool:
        """Make `pid` the job's controller unless another live one holds it (atomic)."""
        now = time.time()
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT controller_pid, controller_seen_at FROM jobs WHERE id = ?", (job_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"No job {job_id!r} in {self.path}.", hint="`spotfit list` shows the known jobs.")
            holder, seen = row["controller_pid"], row["controller_seen_at"] or 0
            if holder not in (None, pid) and now - seen < stale_s and _alive(holder):
                return False
            conn.execute(
                "UPDATE jobs SET controller_pid = ?, controller_seen_at = ?, updated_at = ? WHERE id = ?",
                (pid, now, now, job_id),
            )
            return True

    # attempts -----------------------------------------------------------------------------

    def add_attempt(self, job_id: str, **fields: Any) -> int:
        """Insert the job's next attempt; returns its number (1, 2, ...)."""
        with self.transaction() as conn:
            number = conn.execute(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM attempts WHERE job_id = ?", (job_id,)
            ).fetchone()[0]
            fields = {"job_id": job_id, "number": number, "started_at": time.time(), **fields}
            if "info" in fields:
                fields["info_json"] = json.dumps(fields.pop("info"))
            cols = ", ".join(fields)
            marks = ", ".join("?" for _ in fields)
            conn.execute(f"INSERT INTO attempts ({cols}) VALUES ({marks})", tuple(fields.values()))
        return number

    def update_attempt(self, job_id: str, number: int, **fields: Any) -> None:
        if "info" in fields:
            fields["info_json"] = json.dumps(fields.pop("info"))
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as conn:
            conn.execute(
                f"UPDATE attempts SET {cols} WHERE job_id = ? AND number = ?",
                (*fields.values(), job_id, number),
            )

    def attempts(self, job_id: str) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT * FROM attempts WHERE job_id = ? ORDER BY number", (job_id,)
        ).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            d["info"] = json.loads(d.pop("info_json") or "{}")
            out.append(d)
        return out

    # events -------------------------------------------------------------------------------

    def add_event(
        self, job_id: str, kind: str, message: str, attempt: int | None = None, **data: Any
    ) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO events (job_id, attempt, ts, kind, message, data_json) VALUES (?, ?, ?, ?, ?, ?)",
                (job_id, attempt, time.time(), kind, message, json.dumps(data, default=str)),
            )

    def events(self, job_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT * FROM events WHERE job_id = ? AND id > ? ORDER BY id", (job_id, after_id)
        ).fetchall()
        return [_event(r) for r in rows]

    def last_event(self, job_id: str, kinds: tuple[str, ...]) -> dict[str, Any] | None:
        """The job's newest event of one of `kinds` (what `status` shows), without reading the rest."""
        row = self._conn.execute(
            f"SELECT * FROM events WHERE job_id = ? AND kind IN ({', '.join('?' * len(kinds))}) "
            "ORDER BY id DESC LIMIT 1", (job_id, *kinds)
        ).fetchone()
        return None if row is None else _event(row)


def _event(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    d["data"] = json.loads(d.pop("data_json") or "{}")
    return d


def _alive(pid: int) -> bool:
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
