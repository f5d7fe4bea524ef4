"""A job's state changes only along the transitions allowed here, each checked inside its SQL `WHERE`.

A transition is named by the state it goes to; `ALLOWED[to]` are the states it may leave. Its
UPDATE reads `... WHERE id = ? AND state IN (the allowed ones)`, so the check and the change are
one statement: a transition from any other state changes nothing, even against a writer in another
process that changed the state a moment before (SkyPilot's `jobs/state.py` guards its transitions
the same way). `StateDB.move_job` runs them and says so when one is refused (`state_refused`).

What the table promises:
- an ended job (`completed`, `failed`, `cancelled`) never changes state again;
- a `stopped` job changes only when `spotfit resume` continues it (to `paused`, then `waiting`);
- a `queued` job leaves its batch's queue only to `pending`, or ends `cancelled` or `failed`;
- nothing goes back to `queued` or `pending` (those are where a job starts).

>>> sorted(ALLOWED[JobState.RUNNING])
[<JobState.PENDING: 'pending'>, <JobState.RUNNING: 'running'>, <JobState.WAITING: 'waiting'>]
>>> allowed(JobState.COMPLETED, JobState.RUNNING), allowed(JobState.RUNNING, JobState.COMPLETED)
(False, True)
>>> update_sql(JobState.PENDING, ())
"UPDATE jobs SET state = 'pending', message = ?, updated_at = ? WHERE id = ? AND state IN ('queued')"
"""

from __future__ import annotations

from spotfit.state.states import JobState

_Q, _P, _W, _R, _PA = JobState.QUEUED, JobState.PENDING, JobState.WAITING, JobState.RUNNING, JobState.PAUSED
# Where a job that has started (taken by a controller) may be: an ended one is not among them.
_STARTED = frozenset({_P, _W, _R, _PA})

ALLOWED: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset(),  # only where a job starts (`create_job`)
    JobState.PENDING: frozenset({_Q}),  # its batch's queue releases it
    JobState.WAITING: frozenset({_P, _W, _R, _PA}),  # the policy waits; a paused job resumed
    JobState.RUNNING: frozenset({_P, _W, _R}),  # an attempt launched or adopted
    JobState.PAUSED: _STARTED | {JobState.STOPPED},  # a rule or a price cap; a stopped job being resumed
    JobState.STOPPED: _STARTED,  # a rule's stop, a prune, an interrupt (Ctrl-C)
    JobState.COMPLETED: _STARTED,
    JobState.FAILED: _STARTED | {_Q},
    JobState.CANCELLED: _STARTED | {_Q},
}

# The columns a transition may set besides the state, the message and the time.
EXTRA_COLUMNS = ("result_json", "step", "cancel_requested")


def allowed(source: JobState | str, to: JobState) -> bool:
    """Whether a job in state `source` may move to `to`."""
    return JobState(source) in ALLOWED[to]


def update_sql(to: JobState, extra: tuple[str, ...]) -> str:
    """The transition to `to`, setting `extra` columns too (of `EXTRA_COLUMNS`); its parameters are
    the message, the time, each extra column's value, then the job id."""
    unknown = set(extra) - set(EXTRA_COLUMNS)
    assert not unknown, f"a transition sets no column {sorted(unknown)}"
    sources = ", ".join(f"'{s}'" for s in sorted(ALLOWED[to]))
    sets = "".join(f", {column} = ?" for column in extra)
    return f"UPDATE jobs SET state = '{to}', message = ?, updated_at = ?{sets} WHERE id = ? AND state IN ({sources})"
