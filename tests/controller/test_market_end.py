"""How an attempt's end is named when the market or the policy ended it around the time it ended by itself.

The rule, on the modeled cloud: the model's end stands. A process that exits done after a notice
while modeled work is left (it ran ahead of the modeled instance, or found the result already
written) ended preempted or stopped; a process that the notice reached while it wound down,
after it had written the job's result with no modeled work left, completed. A cancel or a rule
is not the market: its stop stays a stop. (The end-to-end races these decide are in
test_finished_once.py and test_managed_recovery.py; here each case is set exactly.)
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spotfit.controller.attempt_watch import AttemptWatches
from spotfit.controller.market_watch import MarketWatch
from spotfit.state.states import AttemptState

COMPLETED, PREEMPTED, STOPPED = AttemptState.COMPLETED, AttemptState.PREEMPTED, AttemptState.STOPPED


class _Plan:
    """The planner's answers `ended` reads: the clock runs, and `left_s` of modeled work is left."""

    def __init__(self, left_s: float, held: bool = False):
        self.left_s = left_s
        self.clock = SimpleNamespace(running=True)
        self._held = held  # the clock stands at the team budgets' hold

    def held(self, number: int) -> bool:
        return self._held

    def market_event(self, attempt: dict) -> None:
        return None  # no tick ends it now

    def observe_end(self, attempt: dict, progress: dict) -> None:
        pass

    def work_left_s(self, attempt: dict | None = None) -> float:
        return self.left_s


@pytest.mark.parametrize(("flags", "process", "trained_last", "left_s", "named"), [
    (("notified",), COMPLETED, False, 600.0, PREEMPTED),  # ran ahead, or found the result: the rest is modeled
    (("switching", "market_stop"), COMPLETED, False, 600.0, STOPPED),
    (("notified",), COMPLETED, True, 0.0, COMPLETED),
    (("notified",), PREEMPTED, True, 0.0, COMPLETED),  # the notice reached its wind-down after the result
    (("switching", "market_stop"), STOPPED, True, 0.0, COMPLETED),
    (("notified",), PREEMPTED, True, 600.0, PREEMPTED),  # the model stopped it before the end
    (("notified",), PREEMPTED, False, 0.0, PREEMPTED),  # another attempt wrote the result
    (("switching",), STOPPED, True, 0.0, STOPPED),  # a cancel or a rule, not the market
    (("switching",), COMPLETED, False, 600.0, COMPLETED),
])
def test_the_models_end_names_the_attempts_end(flags, process, trained_last, left_s, named):
    watches = AttemptWatches()
    for flag in flags:  # a switch is asked (switching) and is the market's (market_stop)
        setattr(watches[1], flag, True)
    watch = MarketWatch(None, "job-1", _Plan(left_s), watches)  # type: ignore[arg-type]
    attempt = {"number": 1, "market": "spot", "zone": "us-west-2a", "trace_start_s": 0.0}
    assert watch.ended(attempt, process, {}, trained_last) == named


@pytest.mark.parametrize(("flags", "named"), [((), STOPPED), (("notified",), STOPPED)])
def test_a_process_that_ends_while_its_clock_is_held_at_its_allowance_is_stopped(flags, named):
    """Its modeled instance stands at the trace second its team budgets' allowance was spent: the
    process ran ahead of it, and the modeled rest is the next attempt's (rule_actions.py)."""
    watches = AttemptWatches()
    for flag in flags:
        setattr(watches[1], flag, True)
    watch = MarketWatch(None, "job-1", _Plan(600.0, held=True), watches)  # type: ignore[arg-type]
    attempt = {"number": 1, "market": "spot", "zone": "us-west-2a", "trace_start_s": 0.0}
    assert watch.ended(attempt, COMPLETED, {}, False) == named
    assert MarketWatch(None, "job-1", _Plan(0.0, held=True), watches).ended(  # type: ignore[arg-type]
        attempt, COMPLETED, {}, True) == COMPLETED  # the modeled work was done: it completed
