"""The sweep bookkeeping: sweeps, their trials (each linked to a job) and batches, in SQLite.

Its own file, `$SPOTFIT_HOME/sweeps.db`, beside the job state DB: jobs stay ordinary jobs, and a
trial row links an Optuna trial number to the job that runs it. Optuna keeps its own study in
`$SPOTFIT_HOME/optuna.db` (`runner.optuna_url`). WAL mode and short `BEGIN IMMEDIATE` writes,
as in `spotfit/state.py`, so a sweep controller and a `spotfit cancel` may write at once.

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
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spotfit import arguments
from spotfit.errors import NotFoundError

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
    controller_pid INTEGER,
    controller_seen_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS trials (
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
    batch_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (batch_id, job_id)
);
"""


class SweepDB:
    """The sweep database; one per process."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        with self._write() as conn:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # sweeps -------------------------------------------------------------------------------

    def create_sweep(self, sweep_id: str, name: str, spec_json: str, options: dict | None = None) -> None:
        """Record a sweep; `options` are the command line's (`--preempt-at`), kept for `resume`."""
        now = time.time()
        with self._write() as conn:
            conn.execute("INSERT INTO sweeps (id, name, spec_json, options_json, created_at, updated_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (sweep_id, name, spec_json, json.dumps(options or {}), now, now))

    def find_sweep(self, ref: str) -> dict[str, Any] | None:
        """The sweep `ref` names (id, id prefix or name: the newest), or None."""
        ref = arguments.text("SWEEP", ref, hint="`spotfit list` shows the sweeps.",
                             expected="a sweep id, an id prefix or a sweep name")
        rows = self._conn.execute(
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
        return [dict(r) for r in self._conn.execute("SELECT * FROM sweeps ORDER BY created_at DESC")]

    def update_sweep(self, sweep_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._write() as conn:
            conn.execute(f"UPDATE sweeps SET {cols} WHERE id = ?", (*fields.values(), sweep_id))

    # trials -------------------------------------------------------------------------------

    def add_trial(self, sweep_id: str, number: int, params: dict) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO trials (sweep_id, number, params_json) VALUES (?, ?, ?)",
                         (sweep_id, number, json.dumps(params)))

    def update_trial(self, sweep_id: str, number: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self._write() as conn:
            conn.execute(f"UPDATE trials SET {cols} WHERE sweep_id = ? AND number = ?",
                         (*fields.values(), sweep_id, number))

    def trials(self, sweep_id: str) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT * FROM trials WHERE sweep_id = ? ORDER BY number", (sweep_id,))
        return [{**{k: r[k] for k in r.keys() if k != "params_json"}, "params": json.loads(r["params_json"])}
                for r in rows]

    def group_of(self) -> dict[str, str]:
        """job id -> the sweep or batch it belongs to (`spotfit list`)."""
        groups = {r["job_id"]: r["batch_id"] for r in self._conn.execute("SELECT job_id, batch_id FROM batches")}
        groups.update({r["job_id"]: r["sweep_id"] for r in self._conn.execute(
            "SELECT job_id, sweep_id FROM trials WHERE job_id IS NOT NULL")})
        return groups

    # batches ------------------------------------------------------------------------------

    def add_batch(self, batch_id: str, job_ids: list[str]) -> None:
        with self._write() as conn:
            conn.executemany("INSERT INTO batches (batch_id, job_id, position) VALUES (?, ?, ?)",
                             [(batch_id, j, i) for i, j in enumerate(job_ids)])

    def batch(self, batch_id: str) -> list[str]:
        rows = self._conn.execute("SELECT job_id FROM batches WHERE batch_id = ? ORDER BY position", (batch_id,))
        return [r["job_id"] for r in rows]
