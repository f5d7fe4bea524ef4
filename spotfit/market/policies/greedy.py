"""`greedy`: spot whenever it is available, otherwise wait, until the deadline forces on-demand.

This is what "relaunch on preemption" tools do, plus the safety rules of the published Can't
Be Late simulator's greedy baseline, applied in this order:

1. Run spot when it is available, else wait.
2. When idle or on on-demand and the time left is at most the work left + 2d (d the restart
   overhead), run on-demand.
3. When the time left is at most the work left + d, run on-demand, except that a spot
   instance that has paid its start-up rides on until it is preempted.

Times are counted in whole ticks as in `uniform_progress` (`near_deadline`). Several zones: a
launch goes to the cheapest up zone and rides until that zone goes down (`cheapest_spot`), as
`uniform_progress` takes it; `greedy_first` launches in the first up zone of the job's order
instead (`first_spot`, as the published multi-region baseline does).

Example:

>>> Greedy().name, GreedyFirst().name
('greedy', 'greedy_first')
"""

from __future__ import annotations

from typing import ClassVar

from spotfit.market.policies.base import (
    NONE,
    BasePolicy,
    Context,
    Decision,
    cheapest_spot,
    deadline_safety,
    first_spot,
)


class Greedy(BasePolicy):
    name = "greedy"
    multi_zone = True
    pick_spot: ClassVar = staticmethod(cheapest_spot)

    def decide(self, ctx: Context) -> Decision:
        spot_choice = self.pick_spot(ctx)
        return deadline_safety(ctx, spot_choice or NONE, spot_choice)


class GreedyFirst(Greedy):
    """`greedy` launching in the first up zone of the job's order (the published baseline)."""

    name = "greedy_first"
    pick_spot: ClassVar = staticmethod(first_spot)
