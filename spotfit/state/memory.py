"""A controller's state DB kept in memory while the disk under `$SPOTFIT_HOME` is full.

A controller that only waited for space (`state/wait.py`) would stop supervising: no notice
delivered, no rule applied, no next attempt launched, while its attempt trains, and bills, on.
So a controller's SQLite state DB (`StateDB.supervise_from_memory`) turns to a copy in memory
at the first write that finds the disk full: the copy (SQLite's backup API) takes that write
and every later one, and answers the controller's reads, so it supervises as usual. Each write
is also kept, in order; from then on, before each write (0.5 s apart, doubling to 8 s while the
disk stays full) they are written to the disk, oldest first, each in its own transaction, so
the file holds a prefix of them at any moment. Once all are written the copy is dropped and
one `Wait` says how long the disk was full and how many writes waited; the controller records
it as a `state_wait` event. A controller that ends waits for its writes to land
(`flush(wait=True)`): nothing it recorded is lost.

Only the writes of a job's supervision (`DEFERRABLE`) are kept; a claim of a job's lease, or a
new job, must be on the disk before it counts, so those wait for space as before. While the
copy is in use, other processes (`spotfit status`) read the disk's older state, whose lease
runs out after `SPOTFIT_LEASE_TTL_S`: a `spotfit resume` started by hand then (status says the
controller is `gone`) waits for space like any claim, and if it wins the lease before this
controller's writes land, this one stops at its first kept lease renewal (`LeaseLost`) and the
new one adopts what the disk knows. Keep the home's disk from filling; this is the fallback.

Example (the disk's fullness declared; a real full disk is in `tests/controller/test_home_full.py`):

>>> import os, sqlite3, tempfile
>>> from spotfit.state.db import StateDB
>>> db = StateDB(os.path.join(tempfile.mkdtemp(), "state.db"))
>>> db.create_job("j-1", "j", spec_json="{}", store_url="memory://j")
>>> memory = db.supervise_from_memory(notice=lambda line: None, first_backoff_s=60.0)
>>> memory.enter(db, sqlite3.OperationalError("database or disk is full"))
>>> db.update_job("j-1", message="kept in memory"); memory.active, len(memory.pending)
(True, 1)
>>> memory.flush(db, wait=True); memory.active, db.get_job("j-1")["message"], db.waits[0].kept
(False, 'kept in memory', 1)
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from spotfit.state import lease
from spotfit.state.dialect import Sqlite
from spotfit.state.wait import FIRST_BACKOFF_S, MAX_BACKOFF_S, Wait, WaitPolicy, reason_of


class StateDB(Protocol):
    """What the fallback needs of `spotfit.state.db.StateDB` (named by this protocol, so neither module imports
    the other's class): its connection, which it swaps, its name and its waits."""

    _db: Any
    path: str
    wait_policy: WaitPolicy
    waits: list[Wait]

# The writes of a job's supervision: they may land on the disk later, in order.
DEFERRABLE = frozenset({"update_job", "record_progress", "set_step", "set_clock", "request_stop", "move_job",
                        "renew_lease", "release_lease", "controller_seen", "controller_gone", "add_attempt",
                        "update_attempt", "add_event"})


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr, flush=True)


@dataclass
class MemoryFallback:
    """The in-memory copy of one `StateDB` and the writes still to land on its disk."""

    notice: Callable[[str], None] = _warn
    first_backoff_s: float = FIRST_BACKOFF_S
    max_backoff_s: float = MAX_BACKOFF_S
    pending: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    _disk: Sqlite | None = None  # the disk's connection while the copy is in use
    _since: float = 0.0
    _kept: int = 0
    _tries: int = 0
    _backoff_s: float = 0.0
    _next_try: float = 0.0

    @property
    def active(self) -> bool:
        return self._disk is not None

    @staticmethod
    def keeps(write: str) -> bool:
        """Whether the `StateDB` write named `write` may land on the disk later."""
        return write in DEFERRABLE

    def write(self, db: StateDB, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run one of `db`'s writes: on the disk, or on the copy (kept) while the disk is full."""
        if self.active:
            self.flush(db)
        if not self.active:
            try:
                return db.wait_policy.run(lambda: method(db, *args, **kwargs), method.__name__, db.waits.append,
                                          escape=("full",))
            except sqlite3.OperationalError as exc:
                self.enter(db, exc)
        result = method(db, *args, **kwargs)
        self.pending.append((method, args, kwargs))
        self._kept += 1
        return result

    def enter(self, db: StateDB, exc: BaseException) -> None:
        """The disk is full: `db` reads and writes a copy of it in memory from now on."""
        disk = db._db
        assert isinstance(disk, Sqlite), "only a SQLite state DB is kept in memory"
        db._db = Sqlite.memory_copy(disk)
        self._disk, self._since, self._kept, self._tries = disk, time.time(), 0, 1
        self._backoff_s = self.first_backoff_s
        self._next_try = time.monotonic() + self._backoff_s
        self.notice(f"the state DB {db.path} is on a full disk ({exc}): the controller goes on supervising from "
                    "memory and writes what it records there once space is back")

    def flush(self, db: StateDB, wait: bool = False) -> None:
        """Write the kept writes to the disk, oldest first, when the backoff allows; with `wait`, at once
        and then until all have landed."""
        if wait:
            self._next_try = min(self._next_try, time.monotonic())
        while self.active:
            if time.monotonic() >= self._next_try:
                self._try_flush(db)
            if not wait or not self.active:
                return
            time.sleep(max(0.0, self._next_try - time.monotonic()))

    def _try_flush(self, db: StateDB) -> None:
        assert self._disk is not None
        memory, db._db = db._db, self._disk
        try:
            while self.pending:
                method, args, kwargs = self.pending[0]
                method(db, *args, **kwargs)
                self.pending.pop(0)
        except sqlite3.OperationalError as exc:
            if reason_of(exc) is None:
                db._db = memory
                raise
            db._db = memory
            self._tries += 1
            self.notice(f"the state DB {db.path} is still full or locked ({exc}): {len(self.pending)} writes "
                        f"kept in memory, next try in {self._backoff_s:g} s")
            self._next_try = time.monotonic() + self._backoff_s
            self._backoff_s = min(max(self._backoff_s * 2, FIRST_BACKOFF_S), self.max_backoff_s)
            return
        except lease.LeaseLost:  # another controller took the job meanwhile: the disk is the truth
            self._drop(memory)
            raise
        self._drop(memory)
        db.waits.append(Wait(f"{self._kept} writes", "full", self._since, time.time() - self._since,
                             self._tries + 1, kept=self._kept))

    def _drop(self, memory: Any) -> None:
        memory.close()
        self._disk, self.pending = None, []
