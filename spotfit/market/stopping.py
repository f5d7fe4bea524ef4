"""Stopping a simulation from outside: the dashboard's plan has a time limit and ends when its client leaves.

A plan runs in a worker thread, which cannot be killed. `stopping_when(stop)` installs `stop` (a
function that returns why to give up, or None to go on) for the calling thread; the simulator's
tick loops call `check()` every `EVERY` ticks, which raises `Stopped` with that reason. Without a `stop`
installed (`spotfit plan`, `spotfit simulate`) `check()` returns at once: their own bounds
(market/simulator.py's ticks cap, validated at `validate`) keep them finite.

Example:

>>> with stopping_when(lambda: "The plan took longer than 1 s."):
...     check()
Traceback (most recent call last):
...
spotfit.market.stopping.Stopped: The plan took longer than 1 s.
>>> check()  # nothing installed: returns
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from spotfit.errors import SpotfitError

EVERY = 256  # ticks between two checks: a tick costs microseconds, the check less
_local = threading.local()


class Stopped(SpotfitError):
    """A simulation given up on its caller's say (a time limit, a client that left)."""


@contextmanager
def stopping_when(stop: Callable[[], str | None], hint: str | None = None) -> Iterator[None]:
    """Within the block, this thread's simulations raise `Stopped(stop())` once `stop()` says why."""
    before = getattr(_local, "stop", None)
    _local.stop = (stop, hint)
    try:
        yield
    finally:
        _local.stop = before


def check() -> None:
    """Raise `Stopped` if this thread's `stop()` gives a reason; return at once when none is installed."""
    installed = getattr(_local, "stop", None)
    if installed is not None and (why := installed[0]()) is not None:
        raise Stopped(why, hint=installed[1])
