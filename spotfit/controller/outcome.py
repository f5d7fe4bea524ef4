"""How an attempt ended, from its exit status: a pure function the controller and tests share."""

from __future__ import annotations

import signal as _signal

from spotfit.runtime import EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.states import AttemptState

COMPLETED = AttemptState.COMPLETED
PREEMPTED = AttemptState.PREEMPTED
KILLED = AttemptState.KILLED
STOPPED = AttemptState.STOPPED
FAILED = AttemptState.FAILED


def classify(exit_code: int | None, signal: int | None = None) -> AttemptState:
    """Outcome of an attempt that is no longer running.

    >>> [str(classify(code, sig)) for code, sig in [(0, None), (75, None), (None, 9), (1, None)]]
    ['completed', 'preempted', 'killed', 'failed']
    """
    if exit_code == EXIT_DONE:
        return COMPLETED
    if exit_code == EXIT_PREEMPTED:
        return PREEMPTED
    if exit_code == EXIT_STOPPED:
        return STOPPED
    if exit_code is None or signal in (_signal.SIGKILL, _signal.SIGTERM):
        return KILLED
    return FAILED
