"""What the controller has seen and done to each attempt while it watches it: one record each.

The loop and the rule actions read and write these flags; an attempt's record is made the
first time it is asked for, with every flag off.

>>> watches = AttemptWatches()
>>> watches[3].switching
False
>>> watches[3].switching = True
>>> watches[3].asked_to_end(), watches[4].asked_to_end()
(True, False)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass
class AttemptWatch:
    """One attempt's lifecycle as the controller watched it."""

    notified: bool = False  # the market reclaimed its spot capacity: a preemption notice was sent
    switching: bool = False  # asked to end (a switch, a rule, a cancel, a full store, a budget's limit)
    market_stop: bool = False  # the policy stopped it at a tick start (a switch)
    stop_sent: float | None = None  # wall time a stop request was written (SIGTERM follows after a grace)
    cut_off: bool = False  # ended at once at a budget's hard limit
    catch_up: bool = False  # adopted after a controller gap: its unwatched ticks are not asked

    def asked_to_end(self) -> bool:
        """Whether the attempt ends because it was told to: a stop was asked, or the market reclaimed it."""
        return self.switching or self.notified


class AttemptWatches(defaultdict[int, AttemptWatch]):
    """Attempt number -> its `AttemptWatch`, made on first use."""

    def __init__(self) -> None:
        super().__init__(AttemptWatch)
