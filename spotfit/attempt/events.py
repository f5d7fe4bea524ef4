"""The runtime's events: one document each under `events/<n>-<seq>.json` (layout.py), written once, in order.

The runtime writes them (`runtime/reporter.py`); the controller copies each into the state DB as
an event row once (`controller/ingest.py`), reading it through `as_event`, which turns
whatever JSON the store holds into an `EventDoc` or nothing.

>>> import json
>>> doc = as_event(json.loads(encode_event(3, "restored", "restored step 40", ts=0.0, step=40)))
>>> doc["attempt"], doc["kind"], doc["data"]
(3, 'restored', {'step': 40})
>>> as_event({"kind": 1, "message": "m"}), as_event([]), as_event(None)
(None, None, None)
"""

from __future__ import annotations

import json
from typing import Any, TypedDict


class EventDoc(TypedDict):
    """One event: the controller copies it into the state DB as an event row."""

    attempt: int | None
    ts: float
    kind: str  # restored, checkpoint, nan_loss, exit, done, failed, ... (docs/architecture.md)
    message: str
    data: dict[str, Any]


def encode_event(attempt: int, kind: str, message: str, ts: float, **data: Any) -> bytes:
    doc: EventDoc = {"attempt": attempt, "ts": ts, "kind": kind, "message": message, "data": data}
    return json.dumps(doc, default=str).encode()


def as_event(doc: object) -> EventDoc | None:
    """The event a parsed store object holds; None when it is not one (no text `kind` and `message`)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str) or not isinstance(doc.get("message"), str):
        return None
    attempt, extra = doc.get("attempt"), doc.get("data")
    return {"attempt": attempt if isinstance(attempt, int) else None, "ts": float(doc.get("ts") or 0.0),
            "kind": doc["kind"], "message": doc["message"], "data": extra if isinstance(extra, dict) else {}}
