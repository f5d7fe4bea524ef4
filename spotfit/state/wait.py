"""Waiting out a state DB that cannot be written for a while: a lock held elsewhere, a full disk.

Another process may hold the SQLite file's write lock for a long time (a `sqlite3` shell left
in a transaction, a backup), and the disk under `$SPOTFIT_HOME` may fill up. Neither is a
reason for a controller to end: its runtime would train on, and bill, unsupervised. Every
write of `StateDB` is therefore `retried`: when SQLite still reports `database is locked`
after its busy timeout (`SPOTFIT_STATE_BUSY_TIMEOUT_S`, default 5 s), or `database or disk is
full`, the whole write transaction (rolled back by SQLite) is tried again after a backoff of
0.5 s doubling to 8 s, for as long as it takes. Each retry says so on stderr (`notice`); the
write that finally goes through leaves a `Wait` in `StateDB.waits`, which the controller
records as a `state_wait` event. Reads are never blocked by a writer (WAL): `spotfit status`
answers while another process holds the lock.

Example:

>>> import sqlite3
>>> waits = []
>>> policy = WaitPolicy(first_backoff_s=0.0, notice=lambda line: None)
>>> tries = iter([sqlite3.OperationalError("database is locked"), None])
>>> def write():
...     error = next(tries)
...     if error:
...         raise error
...     return "written"
>>> policy.run(write, "update_job", waits.append), [w.reason for w in waits]
('written', ['locked'])
"""

from __future__ import annotations

import functools
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from spotfit.core.arguments import env_number

BUSY_TIMEOUT_ENV = "SPOTFIT_STATE_BUSY_TIMEOUT_S"
DEFAULT_BUSY_TIMEOUT_S = 5.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
T = TypeVar("T")


def busy_timeout_s() -> float:
    """How long one SQLite write waits for the lock before it is retried: `SPOTFIT_STATE_BUSY_TIMEOUT_S`."""
    return env_number(BUSY_TIMEOUT_ENV, DEFAULT_BUSY_TIMEOUT_S)


def reason_of(exc: BaseException) -> str | None:
    """'locked' or 'full' for an error that waiting mends, else None."""
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return "locked"
    return "full" if "disk is full" in text else None


@dataclass(frozen=True)
class Wait:
    """A write that went through after waiting: what, why, since when (epoch s) and for how long."""

    what: str
    reason: str  # locked | full
    since: float
    waited_s: float
    tries: int
    kept: int = 0  # writes kept in memory meanwhile (`state/memory.py`)

    def message(self, target: str) -> str:
        why = "locked by another process" if self.reason == "locked" else "on a full disk"
        if self.kept:
            return (f"the state DB {target} was {why} for {self.waited_s:.0f} s: the controller supervised "
                    f"from memory and wrote its {self.kept} writes once space was back")
        return (f"the state DB {target} was {why} for {self.waited_s:.0f} s ({self.tries} tries of {self.what}): "
                "the controller waited, kept its attempt running, and went on")


@dataclass
class WaitPolicy:
    """Retries one write until it goes through; says so on each retry."""

    first_backoff_s: float = FIRST_BACKOFF_S
    max_backoff_s: float = MAX_BACKOFF_S
    notice: Callable[[str], None] = lambda line: print(f"warning: {line}", file=sys.stderr, flush=True)
    target: str = "state DB"

    def run(self, write: Callable[[], T], what: str, done: Callable[[Wait], None], escape: tuple[str, ...] = ()) -> T:
        """`write()`, tried until it goes through; an error whose reason is in `escape` is raised at once."""
        since, start, tries, backoff, reason = time.time(), time.monotonic(), 0, self.first_backoff_s, None
        while True:
            try:
                result = write()
            except sqlite3.OperationalError as exc:
                reason = reason_of(exc)
                if reason is None or reason in escape:
                    raise
                tries += 1
                self.notice(f"the state DB {self.target} is {'locked' if reason == 'locked' else 'full'} "
                            f"({exc}; {what}, {time.monotonic() - start:.0f} s so far): retrying in {backoff:g} s")
                time.sleep(backoff)
                backoff = min(max(backoff * 2, FIRST_BACKOFF_S), self.max_backoff_s)
                continue
            if tries:
                done(Wait(what, reason or "locked", since, time.monotonic() - start, tries + 1))
            return result


def retried(method: Callable[..., T]) -> Callable[..., T]:
    """A `StateDB` write method, run under its `wait_policy` (its `waits` collect the waits), or by its
    `memory` fallback when it has one and the write is one of a job's supervision (`state/memory.py`)."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> T:
        if self.memory is not None and self.memory.keeps(method.__name__):
            return cast(T, self.memory.write(self, method, args, kwargs))
        return cast(T, self.wait_policy.run(lambda: method(self, *args, **kwargs), method.__name__, self.waits.append))

    return run
