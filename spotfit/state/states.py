"""The states a job and an attempt go through, as `StrEnum`s: stored as their plain strings.

A job is active until it reaches a terminal state; `stopped` (by a rule) is terminal for the
loop but can be resumed. A `queued` job (in a batch, `spotfit submit`) is active but no
controller takes it: its batch's queue releases it (`pending`) when a slot frees.

An attempt is live while `launching` or `running`; every other state says how it ended.

Example:

>>> JobState("running").is_terminal(), JobState.COMPLETED.is_terminal()
(False, True)
>>> JobState.QUEUED.is_terminal(), JobState.QUEUED.is_resumable()
(False, False)
>>> AttemptState.PREEMPTED == "preempted", AttemptState.RUNNING.is_live()
(True, True)
>>> Market("spot") is Market.SPOT, Market.ON_DEMAND == "on_demand"
(True, True)
>>> StopRequest(2).ends_as()
(<JobState.STOPPED: 'stopped'>, 'pruned by its sweep')
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class JobState(StrEnum):
    QUEUED = "queued"  # in a batch, waiting for a slot: its queue makes it pending when one frees
    PENDING = "pending"  # submitted, no controller has started it yet
    WAITING = "waiting"  # the policy waits (no spot, slack left) or a launch will follow
    RUNNING = "running"  # an attempt is running
    PAUSED = "paused"  # paused by a rule or a price cap; `spotfit resume` continues it
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"  # stopped by a rule, with a checkpoint; `spotfit resume` continues it

    def is_terminal(self) -> bool:
        """True when the controller loop ends on this state."""
        return self in _TERMINAL_JOB

    def is_resumable(self) -> bool:
        """True when `spotfit resume` may start a controller for a job in this state (a queued one
        waits for its batch's queue: started by hand, it would take a slot the queue does not know of)."""
        return (not self.is_terminal() and self is not JobState.QUEUED) or self is JobState.STOPPED

    @classmethod
    def active(cls) -> tuple[JobState, ...]:
        """The states of a job that is not finished."""
        return tuple(s for s in cls if not s.is_terminal())


class AttemptState(StrEnum):
    LAUNCHING = "launching"  # recorded before the launch call; no handle yet
    RUNNING = "running"
    COMPLETED = "completed"
    PREEMPTED = "preempted"  # a notice arrived and a checkpoint of the current step was saved
    KILLED = "killed"  # ended without notice (SIGKILL, machine lost): resume from the last checkpoint
    STOPPED = "stopped"  # stopped on request (switch, rule, cancel) with a checkpoint
    FAILED = "failed"  # the user's script or the runtime failed
    NO_CAPACITY = "no_capacity"  # the cloud had no capacity: nothing ran, nothing billed

    def is_live(self) -> bool:
        """True while the attempt may still be running."""
        return self in (AttemptState.LAUNCHING, AttemptState.RUNNING)

    def is_terminal(self) -> bool:
        return not self.is_live()


class Market(StrEnum):
    """What an attempt runs on: spot capacity (it may be reclaimed) or on-demand."""

    SPOT = "spot"
    ON_DEMAND = "on_demand"


class StopRequest(IntEnum):
    """What the jobs row's `cancel_requested` asks of the job's controller (0 = nothing)."""

    NONE = 0
    CANCEL = 1  # `spotfit cancel`: save, stop, end `cancelled`
    PRUNE = 2  # a sweep's pruner: save, stop, end `stopped` (action `pruned`); `resume` continues it
    INTERRUPT = 3  # Ctrl-C on a foreground `spotfit run`/`resume`: save, stop, end `stopped`; `resume` continues it

    def ends_as(self) -> tuple[JobState, str]:
        """The job's state and message once the request is carried out."""
        if self is StopRequest.PRUNE:
            return JobState.STOPPED, "pruned by its sweep"
        if self is StopRequest.INTERRUPT:
            return JobState.STOPPED, "interrupted (Ctrl-C) with a checkpoint: `spotfit resume` continues it"
        return JobState.CANCELLED, "cancelled by the user"


_TERMINAL_JOB = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.STOPPED})
