"""What jobs cost: one job's ledger with its hindsight (`cost`), and the sums over many (`cost_all`).

`cost_all` reads every job created in the window from the state DB (SQLite or PostgreSQL), takes
each one's `cost` document (`job_cost`, the very one `spotfit cost JOB --json` prints, without what
every online policy would have paid; an ended job's as kept: `spotfit/controller/cost_doc.py`) and
sums them by a label, the backend or the zone (`spotfit/controller/spend.py`).

Example:

>>> since_s("30d"), since_s("12h"), since_s("2w")
(2592000.0, 43200.0, 1209600.0)
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from spotfit.controller.cost_doc import cost_of, spend_entries
from spotfit.errors import UsageError
from spotfit.sdk.context import db, find_job
from spotfit.spec.labels import KEY
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


def cost(ref: str | None = None) -> dict[str, Any]:
    """The job's cost ledger (the latest job when `ref` is None): rows, totals, savings, waste, regret.

    `totals` also holds, for the job's own market window, the hindsight optimum (`optimum_usd`),
    what every online policy would have paid (`policies`) and `regret` (spent ÷ optimum);
    `hindsight` gives that window, or a `note` saying why a job has none. An ended job's document
    is computed once and kept (`spotfit/controller/cost_doc.py`).
    """
    state_db = db()
    job = find_job(state_db, ref)
    return cost_of(state_db, job, state_db.attempts(job["id"]))


def cost_all(since: str = "30d", by: str = "project",
             jobs: list[tuple[JobRecord, list[AttemptRecord]]] | None = None) -> dict[str, Any]:
    """Spend, savings against all-on-demand, waste and regret over the jobs created in the last `since`.

    `by`: `backend`, `zone` or a label key (`project`, `owner`, ...). Each job's `cost` document is
    an ended job's kept one, or computed without the policies' replays (`controller/cost_doc.py`);
    `jobs`: the (job, attempts) to sum instead of the state DB's (the dashboard's, before any job).
    The document: `since` (the window's start, ISO), `window`, `by`, `groups`, `totals`, `days`
    and `jobs` (see `spotfit/controller/spend.py`).
    """
    from spotfit.controller.spend import spend_of

    start_s = time.time() - since_s(since)
    by = _check_by(by)
    entries = spend_entries(db(), start_s, jobs) if jobs is None or jobs else []
    return {"since": datetime.fromtimestamp(start_s, UTC).isoformat(timespec="seconds"), "window": since,
            **spend_of(entries, by)}
