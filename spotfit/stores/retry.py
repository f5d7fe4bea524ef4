"""Retrying store calls with exponential backoff, and failing fast while a store is down.

Object stores fail transiently (a restarted server, a dropped connection, throttling). Each
call is retried `attempts` times with exponential backoff; if it still fails, the store is
marked *down* and, for the next `down_s` seconds, calls make `down_attempts` quick attempts
0.1 s apart, without backoff (the second one on a fresh connection, where the first met a stale one): a
training loop that writes progress every second must not stall for the whole backoff on every
write while the server is away. The first call that succeeds clears the mark.

Example:

>>> policy = RetryPolicy(attempts=3, base_s=0.0)
>>> calls = []
>>> def flaky():
...     calls.append(1)
...     if len(calls) < 3:
...         raise ConnectionError("reset")
...     return "ok"
>>> policy.call(flaky, permanent=())
'ok'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
DOWN_PAUSE_S = 0.1  # between the quick attempts while a store is down: a restarting server's moment


@dataclass
class RetryPolicy:
    """Backoff `base_s`, doubled per retry up to `max_s`; `attempts` tries in all."""

    attempts: int = 4
    base_s: float = 0.2
    max_s: float = 2.0
    down_s: float = 10.0
    down_attempts: int = 2
    _down_until: float = field(default=0.0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def down(self) -> bool:
        """Whether the last call exhausted its retries less than `down_s` seconds ago."""
        return time.monotonic() < self._down_until

    def call(self, fn: Callable[[], T], permanent: tuple[type[BaseException], ...]) -> T:
        """Run `fn`, retrying on any exception except those in `permanent`."""
        down = self.down
        attempts = max(1, self.down_attempts if down else self.attempts)
        delay = DOWN_PAUSE_S if down else self.base_s
        for i in range(attempts):
            try:
                result = fn()
            except permanent:
                raise
            except Exception:
                if i == attempts - 1:
                    with self._lock:
                        self._down_until = time.monotonic() + self.down_s
                    raise
                time.sleep(delay)
                delay = delay if down else min(delay * 2, self.max_s)
            else:
                if self._down_until:
                    with self._lock:
                        self._down_until = 0.0
                return result
        raise AssertionError("unreachable")
