"""Waiting on events, never on wall-clock margins.

`wait_for(predicate, timeout_s, what)` polls `predicate` until it returns something truthy and
returns that value; after `timeout_s` it fails the test with "timed out after Ns waiting for
<what>". The timeout is a deadline for a hang, not a margin the test relies on: choose it many
times longer than the event takes on a loaded machine.

Example:

>>> wait_for(lambda: 42, timeout_s=1, what="the answer")
42
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout_s: float, what: str | Callable[[], str], poll_s: float = 0.05) -> T:
    """Poll `predicate` every `poll_s` until it is truthy (returned) or `timeout_s` has passed.

    `what` may be a function, called on a timeout, to say what was last seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            seen = what() if callable(what) else what
            pytest.fail(f"timed out after {timeout_s:g}s waiting for {seen}", pytrace=False)
        time.sleep(poll_s)
