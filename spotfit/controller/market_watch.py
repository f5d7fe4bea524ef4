"""What the market and the policy do to a running attempt: a reclaim of its spot capacity, or a switch.

`Controller` (loop.py) holds one `MarketWatch`. On each pass it asks `event` for the first
tick start passed that ends the attempt (`AttemptPlanner.market_event`, or `catch_up` for an
attempt adopted after a controller gap) and records it on the attempt's `AttemptWatch` (a
`preemption_notice` or a `switch` event); the loop sends the signal. `ended` does the same for
an attempt whose process ended by itself.
"""

from __future__ import annotations

from typing import Any

from spotfit.controller import outcome
from spotfit.controller.attempt_watch import AttemptWatches
from spotfit.controller.attempts import AttemptPlanner
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord
from spotfit.state.states import AttemptState

Event = tuple[str, float]  # ("preempted" | "switch", trace second of the tick start)


class MarketWatch:
    """The replayed market's reclaims and the policy's switches, per attempt."""

    def __init__(self, db: StateDB, job_id: str, plan: AttemptPlanner, watches: AttemptWatches):
        self.db = db
        self.job_id = job_id
        self.plan = plan
        self.watches = watches

    def event(self, attempt: AttemptRecord) -> Event | None:
        """The tick start passed that ends the attempt, if any (none once it was asked to end)."""
        event = self._unwatched_ticks(attempt)
        if event is None and not self.watches[attempt["number"]].asked_to_end():
            event = self.plan.market_event(attempt)
        return event

    def notice(self, attempt: AttemptRecord, event: Event) -> None:
        """The zone's spot capacity is gone at the tick start: a preemption notice."""
        self.watches[attempt["number"]].notified = True
        self.db.add_event(self.job_id, "preemption_notice", f"spot capacity in {attempt['zone']} reclaimed (trace)",
                          attempt=attempt["number"], trace_s=event[1])

    def switch(self, attempt: AttemptRecord, event: Event) -> None:
        """The policy runs something else from the tick start: the attempt is a market stop."""
        self.watches[attempt["number"]].market_stop = True
        self.db.add_event(self.job_id, "switch", f"policy switches to {self.plan.pending_text()}",
                          attempt=attempt["number"], trace_s=event[1])

    def ended(self, attempt: AttemptRecord, result: AttemptState, progress: dict[str, Any],
              trained_last: bool = False) -> AttemptState:
        """An attempt that ended by itself past a tick where the market or the policy ended it.

        The local process may run ahead of the modeled instance (`work_h` counts trace time by steps):
        it ends at that tick instead, and the next one goes on from its checkpoint (or completes).
        Conversely an attempt that wrote the job's result (`trained_last`) and whose notice found
        the modeled work done (on the wall clock: it came while the process wound down) completed.
        """
        watch = self.watches[attempt["number"]]
        self.plan.observe_end(attempt, progress)
        event = self.event(attempt)
        if event is not None and event[0] == "preempted":
            self.notice(attempt, event)
        elif event is not None:
            self.switch(attempt, event)
        # Ended by the market (now or at an earlier notice) before the modeled work was done:
        # the process finished (it ran ahead, or found the result already written) after the
        # modeled instance stopped; the modeled rest is the next attempt's.
        done = self.plan.work_left_s(attempt) <= 1e-6
        if result != outcome.COMPLETED:
            ended_by_market = watch.notified or watch.market_stop
            return outcome.COMPLETED if trained_last and ended_by_market and done else result
        if done:
            return result
        if self.plan.held(attempt["number"]):  # the modeled instance stands at its team budgets' hold: stopped
            return outcome.STOPPED
        if watch.notified:
            return outcome.PREEMPTED
        return outcome.STOPPED if watch.market_stop else result

    def _unwatched_ticks(self, attempt: AttemptRecord) -> Event | None:
        """The ticks an adopted attempt ran through while no controller watched (`plan.catch_up`).

        Once its clock runs again (it was seen training, or ended), those ticks are passed with
        only the market's reclaims; the ticks after them are the policy's, as usual. An attempt
        that finished training meanwhile is adopted as finished, whatever the policy had planned.
        """
        watch = self.watches[attempt["number"]]
        if not watch.catch_up or not self.plan.clock.running:
            return None
        watch.catch_up = False
        return self.plan.catch_up(attempt)
