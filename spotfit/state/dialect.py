"""The two SQL dialects the state DB speaks: SQLite (a file) and PostgreSQL (a team's server).

`db.py` writes its queries once, in SQLite's spelling with `?` placeholders, and its schema
once; a dialect connects, turns the placeholders and column types into its own, opens write
transactions, keeps the schema version and tells the time. PostgreSQL's driver (psycopg 3, the
`postgres` extra) is imported only when a `postgresql://` URL is opened.

Example:

>>> pg = Postgres.__new__(Postgres)
>>> pg.sql("SELECT * FROM jobs WHERE id = ? AND step > ?")
'SELECT * FROM jobs WHERE id = %s AND step > %s'
>>> pg.schema("id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL")
'id BIGSERIAL PRIMARY KEY, ts DOUBLE PRECISION NOT NULL'
>>> display_target("postgresql://team:s3cret@db.internal:5432/spotfit")
'postgresql://team:***@db.internal:5432/spotfit'
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spotfit.errors import UsageError
from spotfit.state.wait import WaitPolicy, busy_timeout_s

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(target: str | Path) -> bool:
    return str(target).startswith(POSTGRES_SCHEMES)


def display_target(target: str | Path) -> str:
    """The state's address as it may be printed: a URL's password masked."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", str(target))


class Sqlite:
    """A state DB file: WAL (readers never block the writer), `BEGIN IMMEDIATE` writes."""

    name = "sqlite"
    for_update = ""  # BEGIN IMMEDIATE already holds the one write lock
    IntegrityError: type[Exception] = sqlite3.IntegrityError

    def __init__(self, path: str | Path):
        Path(path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # A new DB is the owner's alone; SQLite gives its -wal and -shm the DB file's mode. Only a
        # file that does not exist is opened here (O_EXCL): closing any descriptor of an existing DB
        # would drop the POSIX locks this process's connections hold on it, and corrupt it.
        try:
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        busy_ms = int(busy_timeout_s() * 1000)  # then `state_wait` retries the write
        self.conn = sqlite3.connect(str(path), timeout=busy_ms / 1000, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        # Switching a new file to WAL takes its lock without SQLite's busy handler: a process opening
        # the same new DB at that moment gets `database is locked` at once (seen with two `spotfit
        # run` started together on a fresh home, about 1 start in 60). It is waited out as a write is.
        WaitPolicy(first_backoff_s=0.05, target=str(path)).run(
            lambda: self.conn.execute("PRAGMA journal_mode=WAL"), "journal_mode", lambda wait: None)
        self.conn.execute(f"PRAGMA busy_timeout={busy_ms}")
        self.conn.execute("PRAGMA foreign_keys=ON")

    @classmethod
    def read_only(cls, path: str | Path) -> Sqlite:
        """A connection SQLite itself holds read-only (`mode=ro`): every write is refused."""
        self = cls.__new__(cls)
        self.conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True, timeout=30.0,
                                    isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA busy_timeout=30000")
        return self

    @classmethod
    def memory_copy(cls, source: Sqlite) -> Sqlite:
        """A copy of `source`'s database in memory (SQLite's backup API), for `state/memory.py`."""
        self = cls.__new__(cls)
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        source.conn.backup(self.conn)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys=ON")
        return self

    def sql(self, text: str) -> str:
        return text

    def schema(self, text: str) -> str:
        return text

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def lock_schema(self) -> None:
        """Nothing to do: the migration's `BEGIN IMMEDIATE` already excludes every other writer."""

    def lock_key(self, key: str) -> None:
        """Nothing to do: a transaction's `BEGIN IMMEDIATE` already excludes every other writer."""

    def version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def set_version(self, version: int) -> None:
        self.conn.execute(f"PRAGMA user_version={int(version)}")

    def now(self) -> float:
        return time.time()

    def close(self) -> None:
        self.conn.close()


class Postgres:
    """A PostgreSQL database shared by a team: row locks (`FOR UPDATE`), the server's clock."""

    name = "postgresql"
    for_update = " FOR UPDATE"

    def __init__(self, url: str, read_only: bool = False):
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError as exc:
            raise UsageError(f"SPOTFIT_STATE_URL is a PostgreSQL URL ({display_target(url)}), but psycopg is "
                             "not installed.", hint="pip install 'spotfit[postgres]'") from exc
        self.IntegrityError: type[Exception] = psycopg.IntegrityError
        try:
            self.conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=30)
        except psycopg.OperationalError as exc:
            detail = " ".join(str(exc).split())[:200]
            raise UsageError(f"Cannot connect to the state DB {display_target(url)}: {detail}",
                             hint="Check SPOTFIT_STATE_URL (host, port, user, database) and that the "
                                  "server accepts this client.") from exc
        if read_only:  # every transaction of this session, each autocommitted statement included
            self.conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")

    @classmethod
    def read_only(cls, url: str) -> Postgres:
        """A session whose transactions are all read-only: the server refuses every write in it."""
        return cls(url, read_only=True)

    def has_table(self, name: str) -> bool:
        """Whether `name` is a table on this session's search path (no job has run where it is not)."""
        row: Any = self.conn.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (name,)).fetchone()
        return bool(row["found"])

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def schema(self, text: str) -> str:
        text = re.sub(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b", "BIGSERIAL PRIMARY KEY", text)
        return re.sub(r"\bREAL\b", "DOUBLE PRECISION", text)  # PostgreSQL's REAL is 4 bytes: no timestamps

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def lock_schema(self) -> None:
        """Two controllers starting at once: one migrates, the other waits and then finds it done."""
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtext('spotfit-schema'))")
        self.conn.execute("CREATE TABLE IF NOT EXISTS spotfit_schema (version INTEGER NOT NULL)")

    def lock_key(self, key: str) -> None:
        """Serialize the transactions that take the same key (until each commits): a check, then a write."""
        self.conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))

    def version(self) -> int:
        row = self.conn.execute("SELECT version FROM spotfit_schema").fetchone()
        return 0 if row is None else int(row["version"])

    def set_version(self, version: int) -> None:
        self.conn.execute("DELETE FROM spotfit_schema")
        self.conn.execute("INSERT INTO spotfit_schema (version) VALUES (%s)", (version,))

    def now(self) -> float:
        """The server's clock: every controller and laptop compares leases on the same one."""
        row: Any = self.conn.execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS now").fetchone()
        return float(row["now"])

    def close(self) -> None:
        self.conn.close()


def connect(target: str | Path) -> Sqlite | Postgres:
    """The dialect for `target`: a `postgresql://` URL, else a SQLite file path (a `sqlite:` URL is
    `home.state_target`'s to read: taken as a path here, it would make a folder named `sqlite:`)."""
    if str(target).startswith("sqlite:"):
        raise ValueError(f"a SQLite state is opened by its path, not by the URL {str(target)!r} (home.state_target)")
    return Postgres(str(target)) if is_postgres(target) else Sqlite(target)


def execute(dialect: Sqlite | Postgres, text: str, params: tuple[Any, ...] = ()) -> Any:
    """Run one statement in the dialect's spelling; returns the cursor."""
    return dialect.conn.execute(dialect.sql(text), params)


def execute_schema(dialect: Sqlite | Postgres, script: str) -> None:
    """Run each `;`-separated statement of a schema `script` in the dialect's spelling, one at a time
    (SQLite's executescript() would commit the transaction it runs in)."""
    for statement in filter(str.strip, script.split(";")):
        execute(dialect, dialect.schema(statement))
