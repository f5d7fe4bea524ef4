"""Hindsight for one job: what the optimum and every policy would have paid in the job's own window.

The window is the job's: its replayed trace and zones, the trace tick at which it started, the
work it did (trace seconds, as the ledger measures them), its deadline and its restart
overhead (`market.overhead_h`). Each registered online policy is replayed on that window by
the simulator (`spotfit/market/simulator.py`), and the offline optimum is solved on it; the
regret is what the job spent ÷ the optimum. A job without a deadline gets the one its policy
assumed: twice the work plus a day.

Jobs whose market is not a replayed trace (`market.trace: null`, or a cloud backend billed at
live prices) get no figures, and a note that says why.

Example:

>>> from spotfit.spec.job import JobSpec
>>> spec = JobSpec.model_validate({"name": "h", "script": "t.py", "deadline_h": 2, "market": {
...     "trace": "aws-v100", "zones": ["us-west-2b"], "start": "2023-02-19T19:02:01"}})
>>> doc = hindsight(spec, origin_s=1676833321.0, work_s=3600.0, spent_usd=2.0)
>>> doc["optimum_usd"] <= min(doc["policies"].values()), doc["regret"] == round(2.0 / doc["optimum_usd"], 3)
(True, True)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotfit.backends.base import backend_class
from spotfit.errors import SpotfitError
from spotfit.market.job import Job
from spotfit.market.trace_files import resolve_trace
from spotfit.spec.job import JobSpec

if TYPE_CHECKING:
    from spotfit.market.trace import Trace

_NO_DEADLINE_S = 86_400.0  # the slack the controller gives a job without a deadline, beyond twice its work


class OptimumMemo:
    """Optima already solved, with their window, by the digest of the window's inputs (`key`): `cost --all` solves a
    running job's optimum again, and reads its trace, only when its window changed (its work grows only when an
    attempt's bill enters the ledger, as the attempt ends). `lookup`: reads one kept in the state DB
    (`optimum_memo`), None where none is; `new`: solved here, for it to keep; `version`: of the code that solves
    them (`cost_doc.version()`)."""

    def __init__(self, lookup: Callable[[str], dict[str, Any] | None] = lambda key: None, version: str = ""):
        self.lookup = lookup
        self.new: dict[str, dict[str, Any]] = {}
        self.version = version

    def key(self, spec: JobSpec, path: Path, origin_s: float, job: Job) -> str:
        """The digest of what the window comes from: the code's version, the trace file (path, modification time),
        the spec's gap and zones, the job's start, work, deadline, overhead and floor."""
        parts = (self.version, str(path), _mtime_ns(path), spec.market.gap_s, spec.market.zones, origin_s, job.work_s,
                 job.deadline_s, job.overhead_s, job.max_overpay)
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]

    def get(self, key: str) -> dict[str, Any] | None:
        """`{"optimum_usd", "window"}` (the window's `missed_deadline`: the optimum's only), if remembered."""
        return self.new.get(key) or self.lookup(key)


def hindsight(spec: JobSpec | None, origin_s: float | None, work_s: float | None, spent_usd: float,
              policies: bool = True, memo: OptimumMemo | None = None) -> dict[str, Any]:
    """`optimum_usd`, `policies` {name: usd}, `regret` and the window; or a `note` saying why not.

    With `policies=False` only the optimum is solved (`policies` is None): the regret of many jobs
    (`cost --all`) needs no more, and the online policies' replays are most of the work; with a `memo`,
    an optimum it remembers is neither solved again nor its trace read.
    """
    why = _why_not(spec, origin_s, work_s)
    if why is not None:
        return _absent(why)
    assert spec is not None and origin_s is not None and work_s is not None
    deadline_s = spec.deadline_h * 3600.0 if spec.deadline_h else 2 * work_s + _NO_DEADLINE_S
    floor = spec.market.max_overpay if spec.work_h else math.inf  # as the job's policy held it (attempts.py)
    job = Job(work_s, deadline_s, float(round(spec.market.overhead_h * 3600.0)), floor)
    memo = memo or OptimumMemo()
    try:
        path = resolve_trace(spec.market.trace or "")
        key = memo.key(spec, path, origin_s, job)
        seen = memo.get(key)
        if not policies and seen is not None:
            return _figures(seen["optimum_usd"], None, spent_usd, seen["window"])
        trace = _trace(path, spec.market.gap_s).select(spec.market.zones or None)
    except SpotfitError as err:
        return _absent(f"its trace cannot be read now ({err.message})")
    from spotfit.market.policies.base import POLICIES, make_policy  # NumPy: only where a window is replayed
    from spotfit.market.simulator import simulate

    first_s = trace.start.replace(tzinfo=UTC).timestamp() if trace.start.tzinfo is None else trace.start.timestamp()
    start_tick = max(0, int((origin_s - first_s) // trace.gap_s))
    runs = {name: simulate(make_policy(name), trace, job, start_tick, trace.zones) for name in POLICIES
            if policies or name == "optimum"}
    optimum = runs.pop("optimum")
    window: dict[str, Any] = {
        "trace": trace.source, "zones": list(trace.zones),
        "start": datetime.fromtimestamp(first_s + start_tick * trace.gap_s, UTC).isoformat(),
        "work_h": round(work_s / 3600.0, 4), "deadline_h": round(deadline_s / 3600.0, 4),
        "overhead_h": job.overhead_s / 3600.0, "missed_deadline": [] if optimum.met_deadline else ["optimum"],
    }
    if seen is None:
        memo.new[key] = {"optimum_usd": optimum.cost_usd, "window": window}
    missed = sorted([name for name, run in runs.items() if not run.met_deadline] + window["missed_deadline"])
    return _figures(optimum.cost_usd, {name: round(run.cost_usd, 6) for name, run in runs.items()} if policies
                    else None, spent_usd, {**window, "missed_deadline": missed})


def _figures(optimum_usd: float, paid: dict[str, float] | None, spent_usd: float, window: dict[str, Any]
             ) -> dict[str, Any]:
    return {"optimum_usd": round(optimum_usd, 6), "policies": paid,
            "regret": round(spent_usd / optimum_usd, 3) if optimum_usd > 0 else None, "window": window, "note": None}


def _trace(path: Path, gap_s: float | None) -> Trace:
    """The trace at `path`, read once per version of the file (`cost --all` replays many jobs on one trace)."""
    return _load(str(path), _mtime_ns(path), gap_s)


def _mtime_ns(path: Path) -> int:
    try:
        return Path(str(path).split("#", 1)[0]).stat().st_mtime_ns
    except OSError:
        return -1  # load_trace says what is wrong with it


@lru_cache(maxsize=4)
def _load(path: str, version: int, gap_s: float | None) -> Trace:
    from spotfit.market.trace import load_trace

    return load_trace(path, gap_s=gap_s)


def _why_not(spec: JobSpec | None, origin_s: float | None, work_s: float | None) -> str | None:
    if spec is None:
        return "the job's recorded spec does not validate with this version of spotfit"
    if spec.market.trace is None:
        return "the job has no replayed market (`market.trace: null`): there is no window to replay"
    if not backend_class(spec.backend).runs_here:
        return (f"backend {spec.backend} is billed at the cloud's live prices, not at a replayed trace's: "
                "there is no window to replay")
    if origin_s is None or not work_s:
        return "no training step has been billed yet: there is no work to compare"
    return None


def _absent(why: str) -> dict[str, Any]:
    return {"optimum_usd": None, "policies": None, "regret": None, "window": None, "note": why}
