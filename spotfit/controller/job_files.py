"""What the controller reads of a job's store: JSON documents, the attempt's progress, exit codes.

Every read goes through the `StoreGuard`, so an unreachable store is an event and a `None`,
never an exception; the last progress read stands in while the store is away.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from spotfit.attempt import layout
from spotfit.attempt.result import Result, exit_code, parse_result
from spotfit.controller.store_guard import StoreGuard
from spotfit.errors import NotFoundError
from spotfit.stores.base import ObjectStore


class JobFiles:
    def __init__(self, store: ObjectStore, guard: StoreGuard):
        self.store = store
        self.guard = guard
        self._progress_seen: dict[int, dict[str, Any]] = {}  # the last progress read per attempt

    def read_json(self, key: str) -> dict[str, Any] | None:
        """The object `key` as JSON; None when it is missing, damaged or the store is away."""
        try:
            doc = self.guard.call(lambda: json.loads(self.store.read_bytes(key)), fallback=None)
        except (NotFoundError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def progress(self, attempt: int) -> dict[str, Any]:
        """The attempt's `progress.json`; {} when it is another attempt's or none was read yet."""
        doc = self.read_json(layout.PROGRESS)
        if doc is None:  # the last one read stands in while the store is away
            return self._progress_seen.get(attempt, {}) if not self.guard.healthy else {}
        if doc.get("attempt") != attempt:
            return {}
        self._progress_seen = {attempt: doc}
        return doc

    def write(self, key: str, data: bytes) -> bool:
        """Write one object; True (for `StoreGuard.call`, whose fallback is False)."""
        self.store.write_bytes(key, data)
        return True

    def recorded_exit(self, attempt: int) -> int | None:
        """The exit code the attempt's runtime recorded, if any."""
        return exit_code(self.read_json(layout.exit_record(attempt)))

    def read_result(self, wait_s: float, poll_s: float, keep_alive: Callable[[], None]) -> Result | None:
        """`result.json` ({} when missing or damaged), waiting up to `wait_s` while the store is away (None)."""
        deadline = time.time() + wait_s
        while True:
            try:
                data = self.guard.call(lambda: self.store.read_bytes(layout.RESULT), fallback=None)
            except NotFoundError:
                return Result()
            if data is not None:
                return parse_result(data) or Result()
            if time.time() > deadline:
                return None
            keep_alive()
            time.sleep(poll_s)
