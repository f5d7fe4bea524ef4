"""Progress heartbeats and events, written by the runtime under the job's store prefix.

- `progress.json`: the latest step, loss, phase and timings of the running attempt, rewritten
  at most every `heartbeat_s` (and at once on phase changes and held steps).
- `events/<attempt>-<seq>.json`: one object per event (restored, checkpoint saved, corrupt
  checkpoint skipped, preemption notice, ...); the controller copies them into the state DB.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from spotfit.stores.base import ObjectStore


class Reporter:
    """Writes progress and events for one attempt."""

    def __init__(self, store: ObjectStore, attempt: int, heartbeat_s: float = 1.0):
        self.store = store
        self.attempt = attempt
        self.heartbeat_s = heartbeat_s
        self._seq = 0
        self._last_write = 0.0
        self.state: dict[str, Any] = {
            "attempt": attempt,
            "pid": os.getpid(),
            "phase": "starting",
            "step": 0,
            "total_steps": None,
            "epoch": 0,
            "loss": None,
            "metrics": {},
            "timings": {},
        }

    def event(self, kind: str, message: str, **data: Any) -> None:
        self._seq += 1
        doc = {"attempt": self.attempt, "ts": time.time(), "kind": kind, "message": message, "data": data}
        key = f"events/{self.attempt:04d}-{self._seq:06d}.json"
        self.store.write_bytes(key, json.dumps(doc, default=str).encode())

    def progress(self, force: bool = False, **fields: Any) -> None:
        self.state.update(fields)
        now = time.time()
        if force or now - self._last_write >= self.heartbeat_s:
            self.state["heartbeat_at"] = now
            self.store.write_bytes("progress.json", json.dumps(self.state, default=float).encode())
            self._last_write = now

    def timing(self, name: str, seconds: float) -> None:
        self.state["timings"][name] = round(seconds, 4)
