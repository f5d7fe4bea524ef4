"""`greedy`: spot whenever it is available, otherwise wait, until the deadline forces on-demand.

This is what "relaunch on preemption" tools do, plus the safety rules of the published Can't
Be Late simulator's greedy baseline, applied in this order:

1. Run spot when it is available, else wait.
2. When idle or on on-demand and the time left is at most the work left + 2d (d the restart
   overhead), run on-demand.
3. When the time left is at most the work left + d, run on-demand, except that a spot
   instance that has paid its start-up rides on until it is preempted.

Times are counted in whole ticks as in `uniform_progress` (`near_deadline`). Several zones: spot
in the first up zone of the job's order, ridden until that zone goes down, as `uniform_progress`
takes it (`first_spot`).

Example:

>>> Greedy().name
'greedy'
"""

from __future__ import annotations

from spotfit.market.policies.base import (
    NONE,
    BasePolicy,
    Context,
    Decision,
    deadline_safety,
    first_spot,
)


class Greedy(BasePolicy):
    name = "greedy"
    multi_zone = True

    def decide(self, ctx: Context) -> Decision:
        spot_choice = first_spot(ctx)
        return deadline_safety(ctx, spot_choice or NONE, spot_choice)
