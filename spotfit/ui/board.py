"""The jobs board: one row per job with its live state, step, cost and saving, and its state filters.

A pure function over what the state DB holds (job rows and their attempts); the money comes
from the same `ledger` that `spotfit cost` prints, so the board and the CLI agree to the cent.

Example:

>>> job = {"id": "a-1", "name": "a", "state": "running", "step": 5, "total_steps": 10, "loss": 0.5,
...        "created_at": 0.0, "message": None}
>>> row = board_rows([job], {"a-1": []})[0]
>>> row["progress_pct"], row["cost_usd"], row["attempts"]
(50.0, 0.0, 0)
"""

from __future__ import annotations

from spotfit.controller.ledger import ledger
from spotfit.state.records import AttemptRecord
from spotfit.state.states import AttemptState, JobState

STATE_FILTERS = ("all", "active", *JobState)  # `active`: every state that is not terminal


def board_rows(jobs: list[dict], attempts: dict[str, list[AttemptRecord]]) -> list[dict]:
    """A board row per job (newest first, as `jobs` come: the board's columns of each job's row)."""
    rows = []
    for job in jobs:
        tried = attempts.get(job["id"], [])
        totals = ledger(tried, job["total_steps"])["totals"]
        live = next((a for a in reversed(tried) if AttemptState(a["state"]).is_live()), None)
        total = job["total_steps"]
        rows.append({
            "id": job["id"], "name": job["name"], "state": job["state"], "message": job["message"],
            "step": job["step"], "total_steps": total, "loss": job["loss"],
            "progress_pct": round(100.0 * job["step"] / total, 1) if total else None,
            "attempts": len(tried),
            "preemptions": sum(a["state"] == AttemptState.PREEMPTED for a in tried),
            "running_on": None if live is None else (f"spot {live['zone']}" if live["market"] == "spot"
                                                     else "on-demand"),
            # Ended attempts, as `spotfit cost` counts them; a running one is billed when it ends.
            "cost_usd": totals["spent_usd"], "savings_usd": totals["savings_usd"],
            "savings_pct": totals["savings_pct"], "created_at": job["created_at"],
        })
    return rows


def state_filter(choice: str) -> str:
    """A page's `state=` choice as the board takes it: one of `STATE_FILTERS`, `all` for anything else.

    >>> state_filter("running"), state_filter("active"), state_filter("runing")
    ('running', 'active', 'all')
    """
    return choice if choice in STATE_FILTERS else "all"


def states_for(choice: str) -> tuple[str, ...] | None:
    """The job states a `STATE_FILTERS` choice keeps (None: every state).

    >>> states_for("all"), states_for("completed"), "running" in states_for("active")
    (None, ('completed',), True)
    >>> "queued" in states_for("active"), "queued" in STATE_FILTERS  # a batch's job waiting for a slot
    (True, True)
    """
    if choice == "active":
        return tuple(JobState.active())
    return None if choice == "all" else (choice,)
