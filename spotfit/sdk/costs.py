"""What jobs cost: one job's ledger with its hindsight (`cost`), and the sums over many (`cost_all`).

`cost_all` reads every job created in the window from the state DB (SQLite or PostgreSQL), takes
each one's `cost` document (`job_cost`, the very one `spotfit cost JOB --json` prints) and sums
them by a label, the backend or the zone (`spotfit/controller/spend.py`).

Example:

>>> since_s("30d"), since_s("12h"), since_s("2w")
(2592000.0, 43200.0, 1209600.0)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

from spotfit.errors import UsageError
from spotfit.labels import KEY
from spotfit.sdk.context import db, find_job
from spotfit.state.records import AttemptRecord, JobRecord

_UNITS_S = {"h": 3600.0, "d": 86_400.0, "w": 604_800.0}
MAX_SINCE_S = 3650 * 86_400.0  # ten years


def since_s(text: str) -> float:
    """The seconds of a window such as `30d`, `12h` or `2w` (hours, days, weeks; at most ten years)."""
    found = re.fullmatch(r"([0-9]{1,6})([hdw])", text.strip())
    seconds = int(found[1]) * _UNITS_S[found[2]] if found else 0.0
    if not 0 < seconds <= MAX_SINCE_S:
        raise UsageError(f"Invalid `--since`: received {text[:40]!r}, expected a window of hours, days or weeks "
                         "such as 12h, 30d or 2w (at most 3650d).", hint="Pass --since 30d.")
    return seconds


def _check_by(by: str) -> str:
    if not re.fullmatch(KEY, by):
        raise UsageError(f"Invalid `--by`: received {by[:40]!r}, expected backend, zone or a label key such as "
                         "project or owner (lowercase letters, digits and `_`).", hint="Pass --by project.")
    return by


def cost(ref: str | None = None) -> dict:
    """The job's cost ledger (the latest job when `ref` is None): rows, totals, savings, waste, regret.

    `totals` also holds, for the job's own market window, the hindsight optimum (`optimum_usd`),
    what every online policy would have paid (`policies`) and `regret` (spent ÷ optimum);
    `hindsight` gives that window, or a `note` saying why a job has none.
    """
    state_db = db()
    job = find_job(state_db, ref)
    return job_cost(job, state_db.attempts(job["id"]))


def job_cost(job: JobRecord, attempts: list[AttemptRecord]) -> dict:
    """`cost`'s document for a job row and its attempts, as read from the state DB."""
    from spotfit.controller.hindsight import hindsight
    from spotfit.controller.ledger import ledger
    from spotfit.market.policies.base import ALIASES
    from spotfit.spec.job import JobSpec

    doc = ledger(attempts, job["total_steps"])
    totals = doc["totals"]
    origin_s = job["trace_origin_s"] if job["trace_origin_s"] is not None else next(
        (a["trace_start_s"] for a in attempts if a["trace_start_s"] is not None), None)
    try:
        spec: JobSpec | None = JobSpec.model_validate(json.loads(job["spec_json"]))
    except ValueError:  # recorded by a spotfit whose spec differs: the ledger stands without hindsight
        spec = None
    seen = hindsight(spec, origin_s, totals["work_done_s"], totals["spent_usd"])
    totals.update(optimum_usd=seen["optimum_usd"], policies=seen["policies"], regret=seen["regret"])
    policy = ALIASES.get(spec.market.policy, spec.market.policy) if spec else None
    return {"id": job["id"], "name": job["name"], "state": job["state"], "policy": policy, **doc,
            "hindsight": {"window": seen["window"], "note": seen["note"]}}


def cost_all(since: str = "30d", by: str = "project",
             costs: Callable[[JobRecord, list[AttemptRecord]], dict] | None = None,
             jobs: list[tuple[JobRecord, list[AttemptRecord]]] | None = None) -> dict:
    """Spend, savings against all-on-demand, waste and regret over the jobs created in the last `since`.

    `by`: `backend`, `zone` or a label key (`project`, `owner`, ...). `costs` gives a job's
    `cost` document (default `job_cost`; the dashboard passes its cache of the same documents);
    `jobs`: the (job, attempts) to sum instead of the state DB's (the dashboard's, before any job).
    The document: `since` (the window's start, ISO), `window`, `by`, `groups`, `totals`, `days`
    and `jobs` (see `spotfit/controller/spend.py`).
    """
    from spotfit.controller.spend import spend

    start_s = time.time() - since_s(since)
    by = _check_by(by)
    found = db().jobs_since(start_s) if jobs is None else jobs
    entries = [(job, attempts, (costs or job_cost)(job, attempts)) for job, attempts in found]
    return {"since": datetime.fromtimestamp(start_s, UTC).isoformat(timespec="seconds"), "window": since,
            **spend(entries, by)}
