"""The rows of the state DB as typed records: what `StateDB` returns for a job, an attempt and an event."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict


class JobRecord(TypedDict):
    """A row of `jobs`."""

    id: str
    name: str
    spec_json: str
    store_url: str
    state: str
    created_at: float
    updated_at: float
    controller_pid: int | None
    controller_seen_at: float | None
    cancel_requested: int
    step: int
    total_steps: int | None
    loss: float | None
    clock_origin: float | None
    trace_origin_s: float | None
    trace_now_s: float
    message: str | None
    result_json: str | None
    lease_owner: str | None
    lease_expires_at: float | None


class AttemptRecord(TypedDict):
    """A row of `attempts`, its `info_json` decoded as `info`."""

    job_id: str
    number: int
    backend: str
    zone: str | None
    market: str
    state: str
    handle: str | None
    started_at: float
    ended_at: float | None
    trace_start_s: float | None
    trace_end_s: float | None
    start_step: int | None
    end_step: int | None
    exit_code: int | None
    billed_s: float | None
    cost_usd: float | None
    info: dict[str, Any]


class EventRecord(TypedDict):
    """A row of `events`, its `data_json` decoded as `data`."""

    id: int
    job_id: str
    attempt: int | None
    ts: float
    kind: str
    message: str
    data: dict[str, Any]


def trace_start_s(attempt: AttemptRecord) -> float:
    """The trace second `attempt` launched at: every attempt records it at its launch (the controller's
    clock: replayed trace time, or the wall); a `ValueError` names the attempt of a row without it."""
    start = attempt["trace_start_s"]
    if start is None:
        raise ValueError(f"attempt {attempt['number']} of {attempt['job_id']} has no trace start")
    return start


def handle_text(attempt: AttemptRecord) -> str:
    """The backend handle `attempt` was launched with; a `ValueError` for a row recorded before its launch."""
    handle = attempt["handle"]
    if handle is None:
        raise ValueError(f"attempt {attempt['number']} of {attempt['job_id']} has no handle yet")
    return handle


def spot_zone(attempt: AttemptRecord) -> str:
    """The zone of a spot attempt (every spot launch names one); a `ValueError` for a row without it."""
    zone = attempt["zone"]
    if zone is None:
        raise ValueError(f"attempt {attempt['number']} of {attempt['job_id']} is on spot without a zone")
    return zone


def raw_spec_of(job: Mapping[str, Any]) -> dict[str, Any]:
    """The spec a job's row holds as it was recorded, a plain mapping (`{}` for none): for what reads
    the specs of many jobs, some recorded by other versions of spotfit (their labels, their backend),
    and must count each of them rather than refuse one (the typed accessor is `spec.job.spec_of`).

    >>> raw_spec_of({"spec_json": '{"backend": "aws"}'}), raw_spec_of({"spec_json": None})
    ({'backend': 'aws'}, {})
    """
    raw = json.loads(job["spec_json"] or "{}")
    return raw if isinstance(raw, dict) else {}

