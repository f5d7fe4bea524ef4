"""The controller's calls to the job's store: an outage or a full disk is an event, never a crash.

The training goes on while its store is away (the runtime keeps its events and skips saves), so
the controller must too: it keeps watching the attempt through the backend, which does not need
the store. `StoreGuard.call` runs one store call (itself retried with backoff by the store's
`RetryPolicy`); when that still fails it returns the caller's fallback, records one
`store_unreachable` or `store_full` event for the whole outage, and waits a little longer
before each next try (1 s doubling to `MAX_BACKOFF_S`, both under `SPOTFIT_WAIT_SCALE`, see
`waits`). The first call that succeeds again records `store_back`. `spotfit status` shows the
open problem (`problem`) until then.

A missing object (`NotFoundError`) is an answer, not an outage: it passes through.

Example:

>>> from spotfit.errors import StoreError
>>> seen = []
>>> guard = StoreGuard("memory://doc", lambda kind, message: seen.append(kind), backoff_s=0.0)
>>> def down():
...     raise StoreError("Could not list 'events': EndpointConnectionError")
>>> guard.call(down, fallback=[]), guard.call(lambda: ["events/1.json"], fallback=[])
([], ['events/1.json'])
>>> seen
['store_unreachable', 'store_back']
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlparse

from spotfit.controller import waits
from spotfit.errors import StoreError

T = TypeVar("T")
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 8.0
STORE_EVENTS = ("store_unreachable", "store_full", "store_back")


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` (or an error it was raised from) is ENOSPC or a disk quota."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def what_to_free(store_url: str) -> str:
    """The advice of a `store_full` event: where the disk is and how much is free."""
    parsed = urlparse(store_url)
    where = parsed.path if parsed.scheme == "file" else store_url
    free = ""
    if parsed.scheme == "file":
        folder = where
        while folder and not os.path.exists(folder):
            folder = os.path.dirname(folder)
        if folder:
            usage = shutil.disk_usage(folder)
            free = f" ({_size(usage.free)} free of {_size(usage.total)})"
    return (f"the disk of the store {where} is full{free}: free space there (finished jobs' folders under its "
            f"jobs/, `spotfit gc`) or lower `checkpoint.keep`; the job goes on by itself once writes succeed")


class StoreGuard:
    """Runs the controller's store calls; failures become events and fallbacks."""

    def __init__(self, store_url: str, record: Callable[[str, str], None], backoff_s: float = FIRST_BACKOFF_S):
        self.store_url = store_url
        self.record = record  # (event kind, message) -> None
        self.first_backoff_s = waits.scaled(backoff_s)
        self.max_backoff_s = waits.scaled(MAX_BACKOFF_S)
        self.problem: str | None = None  # the open outage's kind, while there is one
        self._backoff_s = self.first_backoff_s
        self._next_try = 0.0
        self._full_since: float | None = None  # monotonic time of the first write that found the disk full

    @property
    def healthy(self) -> bool:
        return self.problem is None

    def full_for_s(self) -> float | None:
        """Seconds since a write first found the store's disk full (None while writes succeed)."""
        return None if self._full_since is None else time.monotonic() - self._full_since

    def call(self, fn: Callable[[], T], fallback: T, writes: bool = False) -> T:
        """`fn()`, or `fallback` while the store fails (and until its next try is due).

        A full disk still answers reads: they go through, and only a write (`writes`) that
        succeeds ends the problem (else each read would record `store_back`, each write
        `store_full` again).
        """
        reading_full = self.problem == "store_full" and not writes
        if self.problem is not None and not reading_full and time.monotonic() < self._next_try:
            return fallback
        try:
            result = fn()
        except StoreError as exc:
            self._failed(exc)
            return fallback
        if reading_full:
            return result
        self._full_since = None
        if self.problem is not None:
            self.problem = None
            self._backoff_s = self.first_backoff_s
            self.record("store_back", f"the store {self.store_url} answers again")
        return result

    def _failed(self, exc: StoreError) -> None:
        kind = "store_full" if is_disk_full(exc) else "store_unreachable"
        if kind == "store_full" and self._full_since is None:
            self._full_since = time.monotonic()
        if kind != self.problem:
            if kind == "store_full":
                message = what_to_free(self.store_url)
            else:
                message = f"the store {self.store_url} does not answer ({exc}); the training goes on, retrying"
            self.record(kind, message)
        else:
            self._backoff_s = min(self._backoff_s * 2, self.max_backoff_s)
        self.problem = kind
        self._next_try = time.monotonic() + self._backoff_s
