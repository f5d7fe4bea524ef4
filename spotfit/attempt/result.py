"""What an attempt leaves when it ends: `result.json` (`Result`) and `attempts/<n>/exit.json` (`ExitRecord`).

The runtime writes a result once, from the attempt that trained the last step (the job's
`result.json`, and the same document under `attempts/<n>/`); the controller copies it into the
job's row (`result_json`), where `spotfit status`, a sweep's objective and its publish read it.
An attempt also records its exit code, so that a controller that adopted the attempt (and so is
not its parent) learns how it ended. Both sides read these documents through the parsers below,
which take whatever the store holds (a damaged or foreign document included) and return a typed
document or nothing.

>>> import json
>>> doc = parse_result(encode_result({"step": 120, "weights_sha256": "ab", "metrics": {"loss": 0.25},
...                                   "attempt": 2}))
>>> doc["step"], doc["metrics"], parse_result(b"[1, 2]"), parse_result(b"{not json")
(120, {'loss': 0.25}, None, None)
>>> job_result('{"step": 3, "metrics": {"accuracy": 0.9}}')["metrics"], job_result(None)
({'accuracy': 0.9}, {})
>>> exit_code(json.loads(encode_exit(75, at=0.0))), exit_code({"code": "75"}), exit_code(None)
(75, None, None)
"""

from __future__ import annotations

import json
from typing import Any, TypedDict, cast


class Result(TypedDict, total=False):
    """`result.json`: the job's trained result (a field is absent when its writer had none)."""

    step: int | None  # steps trained, as the runtime counted them; None: the script built no model
    weights_sha256: str | None  # the final weights' digest (runtime/model_state.py)
    metrics: dict[str, float]  # the last logged metrics
    attempt: int  # the attempt that trained the last step
    offers: list[dict[str, Any]]  # speed-ups `auto` measured and did not apply (runtime/offer.py)
    export: dict[str, Any]  # where the model was published (runtime/export.py): url, version, formats


class ExitRecord(TypedDict):
    """`attempts/<n>/exit.json`: the runtime's exit code and when it exited (epoch seconds)."""

    code: int
    at: float


def encode_result(result: Result) -> bytes:
    return json.dumps(result, default=str).encode()


def parse_result(data: bytes | str) -> Result | None:
    """The result a store object holds; None when it is not a JSON object."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    if not isinstance(doc.get("metrics", {}), dict):
        doc["metrics"] = {}
    return cast(Result, doc)


def job_result(result_json: str | None) -> Result:
    """The result of a job's row (`result_json`); {} for a job without one."""
    return (parse_result(result_json) if result_json else None) or Result()


def encode_exit(code: int, at: float) -> bytes:
    record: ExitRecord = {"code": code, "at": at}
    return json.dumps(record).encode()


def exit_code(doc: object) -> int | None:
    """The code a parsed `exit.json` holds; None when it holds no integer code (or is None)."""
    code = doc.get("code") if isinstance(doc, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None
