"""Persistent state: jobs, attempts and events, in SQLite or PostgreSQL.

By default one SQLite file under `$SPOTFIT_HOME`, in WAL mode so that readers never block the
writer; every write is a short `BEGIN IMMEDIATE` transaction, so two CLI processes (a controller
and a `spotfit cancel` from another shell) can write at once without losing a row. A team points
`SPOTFIT_STATE_URL` at PostgreSQL instead: the same schema and queries (`state/dialect.py`
translates), row locks where a write reads first. The schema is versioned and migrated forward
on open. Each job has a lease (`spotfit/state/lease.py`): the one controller that drives it.

Example:

>>> import tempfile, os
>>> db = StateDB(os.path.join(tempfile.mkdtemp(), "state.db"))
>>> db.create_job("digits-1", "digits", spec_json="{}", store_url="memory://x")
>>> db.get_job("digits-1")["state"]
'pending'
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from spotfit.errors import NotFoundError, SpotfitError
from spotfit.state import lease, transitions
from spotfit.state.dialect import Postgres, Sqlite, connect, display_target, execute, execute_schema
from spotfit.state.memory import MemoryFallback
from spotfit.state.records import AttemptRecord, EventRecord, JobRecord, raw_spec_of
from spotfit.state.schema import MIGRATIONS, SCHEMA_VERSION
from spotfit.state.states import JobState, StopRequest
from spotfit.state.wait import Wait, WaitPolicy, retried

# What a long-running controller picks up: not paused (that waits for `spotfit resume`), not queued
# (that waits for its batch's queue, `spotfit/sdk/batch.py`), not terminal.
CLAIMABLE_STATES = tuple(str(s) for s in (JobState.PENDING, JobState.WAITING, JobState.RUNNING))
# A batch's queue hands a queued job over to the controllers; a cancelled one stays as it is.
RELEASE_QUEUED_SQL = transitions.update_sql(JobState.PENDING, ())


class StateDB:
    """The state database; open one per process or thread (connections are not shared).

    `target` is a SQLite file path or a `postgresql://` URL (`home.state_target()` picks it).
    """

    def __init__(self, target: str | Path):
        self.target = str(target)  # where it is, as given (a URL with its password: never printed)
        self.path = display_target(target)  # what errors name (a URL's password masked)
        self._db = connect(target)
        self.dialect = self._db.name
        self.IntegrityError = self._db.IntegrityError  # a duplicate id, an unknown job
        self.wait_policy = WaitPolicy(target=self.path)  # how a locked or full state DB is waited out
        self.waits: list[Wait] = []  # writes that went through after waiting (the controller records them)
        self.memory: MemoryFallback | None = None  # a controller's copy while the disk is full
        self._migrate()

    def supervise_from_memory(self, **options: Any) -> MemoryFallback | None:
        """A controller's DB: on a full disk, go on in memory and write to the disk once space is back
        (`state/memory.py`; SQLite only: a PostgreSQL server's disk is its own). `options`: of `MemoryFallback`."""
        if isinstance(self._db, Sqlite):
            self.memory = MemoryFallback(**options)
        return self.memory

    def flush(self) -> None:
        """Wait until every write kept in memory (a full disk) is on the disk."""
        if self.memory is not None:
            self.memory.flush(self, wait=True)

    @property
    def connection(self) -> Sqlite | Postgres:
        """The one connection (for tables of other parts kept in the same DB: controller/budget_store.py)."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def _q(self, text: str, params: tuple[Any, ...] = ()) -> Any:
        return execute(self._db, text, params)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction that takes the write lock at once (no upgrade deadlocks)."""
        with self._db.transaction():
            yield

    def now(self) -> float:
        """The state DB's clock (the server's, on PostgreSQL): leases are compared on it."""
        return self._db.now()

    def _migrate(self) -> None:
        if self._schema_current():  # a read: a writer holding the lock does not block it
            return
        try:
            self._migrate_in_transaction()
        except SpotfitError:
            self._db.close()
            raise

    def _schema_current(self) -> bool:
        if isinstance(self._db, Postgres) and not self._db.has_table("spotfit_schema"):
            return False
        return self._db.version() == SCHEMA_VERSION

    def _migrate_in_transaction(self) -> None:
        with self.transaction():
            self._db.lock_schema()
            version = self._db.version()
            if version > SCHEMA_VERSION:
                raise SpotfitError(
                    f"State DB {self.path} has schema version {version}, newer than this "
                    f"spotfit understands ({SCHEMA_VERSION}).",
                    hint="Upgrade spotfit, or point SPOTFIT_HOME (or SPOTFIT_STATE_URL) elsewhere.",
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                execute_schema(self._db, MIGRATIONS[target])
                self._db.set_version(target)

    # jobs ---------------------------------------------------------------------------------

    @retried
    def create_job(self, job_id: str, name: str, spec_json: str, store_url: str,
                   state: JobState = JobState.PENDING, unique_live_name: bool = False) -> dict[str, Any] | None:
        """Record a job: `pending` (a controller takes it), or `queued` (a batch's queue releases it).

        `unique_live_name`: unless a live (not terminal) job has the name; that job is returned
        and nothing is recorded. Checked and recorded in one transaction, so of two submissions
        at once one is refused.
        """
        now = time.time()
        with self.transaction():
            if unique_live_name:
                self._db.lock_key(f"spotfit-job-name:{name}")
                live = self.live_job_named(name)
                if live is not None:
                    return live
            self._q("INSERT INTO jobs (id, name, spec_json, store_url, state, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", (job_id, name, spec_json, store_url, str(state), now, now))
        return None

    def live_job_named(self, name: str) -> dict[str, Any] | None:
        """The newest job of this name that has not ended (queued, pending, waiting, running, paused)."""
        active = tuple(str(s) for s in JobState.active())
        row = self._q(f"SELECT * FROM jobs WHERE name = ? AND state IN ({', '.join('?' * len(active))}) "
                      "ORDER BY created_at DESC LIMIT 1", (name, *active)).fetchone()
        return None if row is None else dict(row)

    @retried
    def release_queued(self, job_id: str, message: str) -> bool:
        """A queued job becomes pending (a controller may take it); False when it was no longer queued."""
        with self.transaction():
            return bool(self._q(RELEASE_QUEUED_SQL, (message, time.time(), job_id)).rowcount)

    def get_job(self, job_id: str) -> JobRecord:
        row = self._q("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFoundError(
                f"No job {job_id!r} in {self.path}.",
                hint="`spotfit list` shows the known jobs.",
            )
        return cast(JobRecord, dict(row))

    def find_job(self, ref: str) -> JobRecord:
        """A job by id, id prefix, or name (the newest job of that name)."""
        rows = self._q(
            "SELECT * FROM jobs WHERE id = ? OR name = ? OR substr(id, 1, ?) = ? ORDER BY created_at DESC",
            (ref, ref, len(ref), ref),
        ).fetchall()
        for column in ("id", "name"):
            found = [r for r in rows if r[column] == ref]
            if found:
                return cast(JobRecord, dict(found[0]))
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
        return cast(JobRecord, dict(rows[0]))

    def list_jobs(self, limit: int = 50) -> list[JobRecord]:
        rows = self._q("SELECT * FROM jobs ORDER BY created_at DESC LIMIT ?", (limit,)).fetchall()
        return [cast(JobRecord, dict(r)) for r in rows]

    @retried
    def move_job(self, job_id: str, to: JobState, message: str, *, result: dict[str, Any] | None = None,
                 step: int | None = None, clear_request: bool = False) -> bool:
        """Move the job to state `to` with `message`, if `to` may follow the state it is in
        (`state/transitions.py`, checked in the UPDATE's `WHERE`): True when it moved. A refused
        transition changes nothing and says so in a `state_refused` event.

        `result` (the training's result) and `step` are set with it; `clear_request` clears a
        cancel or stop request the job had (a stopped job being resumed).
        """
        if to is JobState.QUEUED:
            raise ValueError("a job is queued only when it is created (create_job)")
        extra: dict[str, Any] = {}
        if result is not None:
            extra["result_json"] = json.dumps(result)
        if step is not None:
            extra["step"] = step
        if clear_request:
            extra["cancel_requested"] = int(StopRequest.NONE)
        with self.transaction():
            moved = self._q(transitions.update_sql(to, tuple(extra)),
                            (message, time.time(), *extra.values(), job_id)).rowcount
            if not moved:
                row = self._q("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
                if row is None:
                    raise NotFoundError(f"No job {job_id!r} in {self.path}.",
                                        hint="`spotfit list` shows the known jobs.")
                self._q("INSERT INTO events (job_id, attempt, ts, kind, message, data_json) VALUES (?, ?, ?, ?, ?, ?)",
                        (job_id, None, time.time(), "state_refused",
                         f"state {to} refused: the job is {row['state']}, which {to} may not follow ({message})",
                         json.dumps({"from": row["state"], "to": str(to)})))
        return bool(moved)

    @retried
    def record_progress(self, job_id: str, step: int, total_steps: int | None, loss: float | None) -> None:
        """The training's progress as its running attempt last reported it (`controller/ingest.py`)."""
        self._set(job_id, step=step, total_steps=total_steps, loss=loss)

    @retried
    def set_step(self, job_id: str, step: int) -> None:
        """The step the job is at once an attempt's end is recorded (`controller/attempt_end.py`)."""
        self._set(job_id, step=step)

    @retried
    def set_clock(self, job_id: str, clock_origin: float, trace_origin_s: float | None) -> None:
        """Where the job's replayed clock starts: the wall time and the trace second (`controller/attempts.py`)."""
        self._set(job_id, clock_origin=clock_origin, trace_origin_s=trace_origin_s)

    @retried
    def request_stop(self, job_id: str, request: StopRequest) -> None:
        """Ask the job's controller to stop it (a cancel, a sweep's prune, an interrupt): `StopRequest`."""
        self._set(job_id, cancel_requested=int(request))

    @retried
    def replace_spec(self, job_id: str, spec_json: str, message: str) -> None:
        """The job's spec, as `spotfit move` changed it for its next attempt (`sdk/move.py`)."""
        self._set(job_id, spec_json=spec_json, message=message)

    @retried
    def update_job(self, job_id: str, **fields: Any) -> None:
        """Set any column but the state: for tests and tools that stage a row (spotfit's own writes are the
        named ones above, and `move_job`; a test holds it)."""
        self._set(job_id, **fields)

    def _set(self, job_id: str, **fields: Any) -> None:
        if "state" in fields:
            raise ValueError("a job's state changes only through StateDB.move_job (state/transitions.py)")
        if not fields:
            return
        fields["updated_at"] = time.time()
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction():
            self._q(f"UPDATE jobs SET {cols} WHERE id = ?", (*fields.values(), job_id))

    # the lease (spotfit/state/lease.py) -----------------------------------------------------------

    @retried
    def claim_lease(self, job_id: str, holder: lease.Holder, ttl_s: float) -> bool:
        """Make `holder` the job's one controller for `ttl_s`, unless another live holder has it.

        Under the job row's lock, so of two controllers claiming at once exactly one wins.
        """
        with self.transaction():
            row = self._q("SELECT lease_owner, lease_expires_at FROM jobs WHERE id = ?" + self._db.for_update,
                          (job_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"No job {job_id!r} in {self.path}.", hint="`spotfit list` shows the known jobs.")
            now = self._db.now()
            if lease.held_by_other(row["lease_owner"], row["lease_expires_at"], now, holder):
                return False
            self._q("UPDATE jobs SET lease_owner = ?, lease_expires_at = ?, controller_pid = ?, "
                    "controller_seen_at = ?, updated_at = ? WHERE id = ?",
                    (holder.key, now + ttl_s, holder.pid, now, time.time(), job_id))
            return True

    @retried
    def renew_lease(self, job_id: str, holder: lease.Holder, ttl_s: float, **fields: Any) -> None:
        """The heartbeat: extend `holder`'s lease (and set `fields`); `LeaseLost` if it is not its own."""
        now = self._db.now()
        fields = {**fields, "lease_expires_at": now + ttl_s, "controller_pid": holder.pid,
                  "controller_seen_at": now, "updated_at": time.time()}
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction():
            cursor = self._q(f"UPDATE jobs SET {cols} WHERE id = ? AND lease_owner = ?",
                             (*fields.values(), job_id, holder.key))
        if cursor.rowcount == 0:
            owner = self.get_job(job_id)["lease_owner"]
            raise lease.LeaseLost(f"Job {job_id} is driven by another controller now ({owner}); "
                                  f"this one ({holder.key}) stops driving it.",
                                  hint=f"Watch it with `spotfit status {job_id}`.")

    @retried
    def release_lease(self, job_id: str, holder: lease.Holder, **fields: Any) -> None:
        """Give the job up (and set `fields`), if `holder` still has it: another controller may take it at once."""
        fields = {**fields, "lease_owner": None, "lease_expires_at": None, "updated_at": time.time()}
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction():
            self._q(f"UPDATE jobs SET {cols} WHERE id = ? AND lease_owner = ?", (*fields.values(), job_id, holder.key))

    def lease_live(self, job: JobRecord) -> bool:
        """Whether a controller holds the lease of `job` (a row from `get_job`) now."""
        nobody = lease.Holder(lease.this_host(), -1, "")  # no holder's key: only the lease itself counts
        return lease.held_by_other(job.get("lease_owner"), job.get("lease_expires_at"), self.now(), nobody)

    def claimable_jobs(self, holder: lease.Holder) -> list[str]:
        """Active jobs, oldest first, whose lease `holder` could claim now (`claim_lease` decides)."""
        rows = self._q(f"SELECT id, lease_owner, lease_expires_at FROM jobs WHERE state IN "
                       f"({', '.join('?' * len(CLAIMABLE_STATES))}) ORDER BY created_at", CLAIMABLE_STATES).fetchall()
        now = self._db.now()
        return [r["id"] for r in rows if not lease.held_by_other(r["lease_owner"], r["lease_expires_at"], now, holder)]

    # long-running controllers ------------------------------------------------------------------

    @retried
    def controller_seen(self, holder: lease.Holder, jobs: int) -> None:
        """A `spotfit controller`'s heartbeat (what `spotfit run --detach` checks on a shared state)."""
        now = self._db.now()
        with self.transaction():
            cursor = self._q("UPDATE controllers SET seen_at = ?, jobs = ? WHERE id = ?", (now, jobs, holder.key))
            if cursor.rowcount == 0:
                self._q("INSERT INTO controllers (id, host, pid, started_at, seen_at, jobs) VALUES (?, ?, ?, ?, ?, ?)",
                        (holder.key, holder.host, holder.pid, now, now, jobs))

    def live_controllers(self, within_s: float) -> list[dict[str, Any]]:
        """The long-running controllers seen in the last `within_s` seconds."""
        rows = self._q("SELECT * FROM controllers WHERE seen_at > ? ORDER BY started_at",
                       (self._db.now() - within_s,)).fetchall()
        return [dict(r) for r in rows]

    @retried
    def controller_gone(self, holder: lease.Holder) -> None:
        with self.transaction():
            self._q("DELETE FROM controllers WHERE id = ?", (holder.key,))

    # attempts -----------------------------------------------------------------------------

    @retried
    def add_attempt(self, job_id: str, **fields: Any) -> int:
        """Insert the job's next attempt; returns its number (1, 2, ...)."""
        with self.transaction():
            # The job row's lock numbers attempts one at a time on PostgreSQL too (SQLite: the write lock).
            self._q("SELECT id FROM jobs WHERE id = ?" + self._db.for_update, (job_id,))
            number = self._q("SELECT COALESCE(MAX(number), 0) + 1 AS next FROM attempts WHERE job_id = ?",
                             (job_id,)).fetchone()["next"]
            fields = {"job_id": job_id, "number": number, "started_at": time.time(), **fields}
            if "info" in fields:
                fields["info_json"] = json.dumps(fields.pop("info"))
            cols = ", ".join(fields)
            marks = ", ".join("?" for _ in fields)
            self._q(f"INSERT INTO attempts ({cols}) VALUES ({marks})", tuple(fields.values()))
        return int(number)

    @retried
    def update_attempt(self, job_id: str, number: int, **fields: Any) -> None:
        if "info" in fields:
            fields["info_json"] = json.dumps(fields.pop("info"))
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction():
            self._q(f"UPDATE attempts SET {cols} WHERE job_id = ? AND number = ?", (*fields.values(), job_id, number))

    def attempts(self, job_id: str) -> list[AttemptRecord]:
        rows = self._q("SELECT * FROM attempts WHERE job_id = ? ORDER BY number", (job_id,)).fetchall()
        return [_attempt(r) for r in rows]

    def jobs_since(self, since: float, unkept: str | None = None) -> list[tuple[JobRecord, list[AttemptRecord]]]:
        """(job, its attempts) for every job created at or after `since` (epoch seconds), oldest first; with
        `unkept` (a code version), only those without a kept spend entry of that version (`kept_spend_entries`)."""
        if unkept is None:
            jobs = [cast(JobRecord, dict(r)) for r in self._q(
                "SELECT * FROM jobs WHERE created_at >= ? ORDER BY created_at, id", (since,)).fetchall()]
            rows = self._q("SELECT a.* FROM attempts a JOIN jobs j ON a.job_id = j.id WHERE j.created_at >= ? "
                           "ORDER BY a.job_id, a.number", (since,)).fetchall()
        else:  # a few live jobs among many ended ones: their attempts by id, not a scan of every attempt
            jobs = [cast(JobRecord, dict(r)) for r in self._q(
                "SELECT * FROM jobs j WHERE j.created_at >= ? AND NOT EXISTS (SELECT 1 FROM job_costs c WHERE "
                "c.job_id = j.id AND c.version = ? AND c.entry_json IS NOT NULL) ORDER BY j.created_at, j.id",
                (since, unkept)).fetchall()]
            ids = [j["id"] for j in jobs]
            rows = [r for at in range(0, len(ids), 500) for r in self._q(
                f"SELECT * FROM attempts WHERE job_id IN ({', '.join('?' * len(ids[at:at + 500]))}) "
                "ORDER BY job_id, number", tuple(ids[at:at + 500])).fetchall()]
        attempts: dict[str, list[AttemptRecord]] = {j["id"]: [] for j in jobs}
        for r in rows:
            if r["job_id"] in attempts:  # a job recorded between the two reads is left for the next look
                attempts[r["job_id"]].append(_attempt(r))
        return [(j, attempts[j["id"]]) for j in jobs]

    def billed_since(self, since: float) -> list[tuple[dict[str, Any], float]]:
        """(spec as recorded, USD) per job: what its attempts launched at or after `since` were billed (team budget)."""
        rows = self._q("SELECT j.spec_json AS spec_json, SUM(a.cost_usd) AS usd FROM attempts a JOIN jobs j "
                       "ON a.job_id = j.id WHERE a.started_at >= ? AND a.cost_usd IS NOT NULL "
                       "GROUP BY j.id, j.spec_json", (since,)).fetchall()
        return [(raw_spec_of(r), float(r["usd"])) for r in rows]

    # ended jobs' cost documents (controller/cost_doc.py) ------------------------------------

    @retried
    def keep_cost_docs(self, version: str, docs: dict[str, str], entries: dict[str, str] | None = None) -> None:
        """Keep the cost documents (JSON) of ended jobs, by job id, computed by code `version`, and their spend
        entries (JSON) where given; a document kept again without one keeps the entry of its version."""
        with self.transaction():
            for job_id, doc_json in docs.items():
                self._q("INSERT INTO job_costs (job_id, version, doc_json, entry_json) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (job_id) DO UPDATE SET doc_json = excluded.doc_json, entry_json = CASE WHEN "
                        "job_costs.version = excluded.version THEN COALESCE(excluded.entry_json, job_costs.entry_json) "
                        "ELSE excluded.entry_json END, version = excluded.version",
                        (job_id, version, doc_json, (entries or {}).get(job_id)))

    def kept_spend_entries(self, version: str, since: float) -> dict[str, str]:
        """The kept spend entries (JSON) of code `version`, by job id, of the jobs created at or after `since`."""
        rows = self._q("SELECT c.job_id AS job_id, c.entry_json AS entry_json FROM job_costs c JOIN jobs j "
                       "ON c.job_id = j.id WHERE j.created_at >= ? AND c.version = ? AND c.entry_json IS NOT NULL",
                       (since, version)).fetchall()
        return {r["job_id"]: r["entry_json"] for r in rows}

    def kept_cost_docs(self, version: str, since: float = 0.0, job_id: str | None = None) -> dict[str, str]:
        """The kept cost documents (JSON) of code `version`, by job id: of the jobs created at or after
        `since`, or of the one job `job_id`."""
        if job_id is not None:
            rows = self._q("SELECT job_id, doc_json FROM job_costs WHERE job_id = ? AND version = ?",
                           (job_id, version)).fetchall()
        else:
            rows = self._q("SELECT c.job_id AS job_id, c.doc_json AS doc_json FROM job_costs c JOIN jobs j "
                           "ON c.job_id = j.id WHERE j.created_at >= ? AND c.version = ?", (since, version)).fetchall()
        return {r["job_id"]: r["doc_json"] for r in rows}

    def keep_optima(self, optima: dict[str, dict[str, Any]]) -> None:
        """Keep solved optima with their windows, by the digest of the window's inputs (`hindsight.OptimumMemo`)."""
        with self.transaction():
            for key, doc in optima.items():
                self._q("INSERT INTO optimum_memo (key, doc_json) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                        (key, json.dumps(doc)))

    def kept_optimum(self, key: str) -> dict[str, Any] | None:
        """The optimum kept for the window of digest `key`, with its window; None if none is."""
        row = self._q("SELECT doc_json FROM optimum_memo WHERE key = ?", (key,)).fetchone()
        return None if row is None else cast(dict[str, Any], json.loads(row["doc_json"]))

    def kept_optima_count(self) -> int:
        """How many optima are kept (every window's, as long as the state DB lives)."""
        return int(self._q("SELECT COUNT(*) AS n FROM optimum_memo").fetchone()["n"])

    # events -------------------------------------------------------------------------------

    @retried
    def add_event(
        self, job_id: str, kind: str, message: str, attempt: int | None = None, **data: Any
    ) -> None:
        with self.transaction():
            self._q("INSERT INTO events (job_id, attempt, ts, kind, message, data_json) VALUES (?, ?, ?, ?, ?, ?)",
                    (job_id, attempt, time.time(), kind, message, json.dumps(data, default=str)))

    def events(self, job_id: str, after_id: int = 0) -> list[EventRecord]:
        rows = self._q("SELECT * FROM events WHERE job_id = ? AND id > ? ORDER BY id", (job_id, after_id)).fetchall()
        return [_event(r) for r in rows]

    def events_of_kinds(self, kinds: tuple[str, ...]) -> list[EventRecord]:
        """Every job's events of one of `kinds`, oldest first (the metrics count rule firings)."""
        rows = self._q(f"SELECT * FROM events WHERE kind IN ({', '.join('?' * len(kinds))}) ORDER BY id",
                       kinds).fetchall()
        return [_event(r) for r in rows]

    def last_event(self, job_id: str, kinds: tuple[str, ...]) -> EventRecord | None:
        """The job's newest event of one of `kinds` (what `status` shows), without reading the rest."""
        row = self._q(
            f"SELECT * FROM events WHERE job_id = ? AND kind IN ({', '.join('?' * len(kinds))}) "
            "ORDER BY id DESC LIMIT 1", (job_id, *kinds)
        ).fetchone()
        return None if row is None else _event(row)


def _attempt(row: Any) -> AttemptRecord:
    d = dict(row)
    d["info"] = json.loads(d.pop("info_json") or "{}")
    return cast(AttemptRecord, d)


def _event(row: Any) -> EventRecord:
    d = dict(row)
    d["data"] = json.loads(d.pop("data_json") or "{}")
    return cast(EventRecord, d)
