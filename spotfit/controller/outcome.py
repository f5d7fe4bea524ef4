"""How an attempt ended, from its exit status: a pure function the controller and tests share."""

from __future__ import annotations

import signal as _signal

from spotfit.runtime import EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED

COMPLETED = "completed"
PREEMPTED = "preempted"  # a notice arrived and a checkpoint of the current step was saved
KILLED = "killed"  # ended without notice (SIGKILL, machine lost): resume from the last checkpoint
STOPPED = "stopped"  # stopped on request (switch, rule, cancel) with a checkpoint
FAILED = "failed"  # the user's script or the runtime failed


def classify(exit_code: int | None, signal: int | None = None) -> str:
    """Outcome of an attempt that is no longer running.

    >>> classify(0), classify(75), classify(None, 9), classify(1)
    ('completed', 'preempted', 'killed', 'failed')
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
