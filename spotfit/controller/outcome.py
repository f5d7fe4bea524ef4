"""How an attempt ended, from its exit status: a pure function the controller and tests share."""

from __future__ import annotations

import signal as _signal

from spotfit.attempt.exit_codes import EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.state.states import AttemptState

COMPLETED = AttemptState.COMPLETED
PREEMPTED = AttemptState.PREEMPTED
KILLED = AttemptState.KILLED
STOPPED = AttemptState.STOPPED
FAILED = AttemptState.FAILED


def classify(exit_code: int | None, signal: int | None = None, disrupted: bool = False) -> AttemptState:
    """Outcome of an attempt that is no longer running.

    `disrupted`: the platform says it took the machine away (a Kubernetes pod's
    `DisruptionTarget` condition); whatever the exit code then, the attempt was preempted, not
    failed (a kill before the checkpoint was written included: the next attempt resumes from
    the one before).

    >>> [str(classify(code, sig)) for code, sig in [(0, None), (75, None), (None, 9), (1, None)]]
    ['completed', 'preempted', 'killed', 'failed']
    >>> str(classify(137, None, disrupted=True))
    'preempted'
    """
    if exit_code == EXIT_DONE:
        return COMPLETED
    if exit_code == EXIT_PREEMPTED or (disrupted and exit_code != EXIT_STOPPED):
        return PREEMPTED
    if exit_code == EXIT_STOPPED:
        return STOPPED
    if exit_code is None or signal in (_signal.SIGKILL, _signal.SIGTERM):
        return KILLED
    return FAILED
