"""`greedy`: spot whenever it is available, otherwise wait, until the deadline forces on-demand.

This is what "relaunch on preemption" tools do, plus the safety rules of the published Can't
Be Late simulator's greedy baseline, applied in this order:

1. Run spot when it is available, else wait.
2. When idle or on on-demand and the time left is at most the work left + 2d (d the restart
   overhead), run on-demand.
3. When the time left is at most the work left + d, run on-demand, except that a spot
   instance that has paid its start-up rides on until it is preempted.

Times are counted in whole ticks as in `uniform_progress` (`near_deadline`).

Example:

>>> Greedy().name
'greedy'
"""

from __future__ import annotations

from spotfit.market.policies.base import (
    NONE,
    ON_DEMAND,
    BasePolicy,
    Context,
    Decision,
    Kind,
    near_deadline,
    spot,
)


class Greedy(BasePolicy):
    name = "greedy"

    def decide(self, ctx: Context) -> Decision:
        zone = ctx.zones[0]
        has_spot = ctx.market.is_available(zone)
        mode = ctx.mode.kind
        d = ctx.overhead_s
        choice = spot(zone) if has_spot else NONE
        if mode is not Kind.SPOT and near_deadline(ctx, 2 * d):
            choice = ON_DEMAND
        if near_deadline(ctx, d):
            riding = mode is Kind.SPOT and ctx.overhead_left_s < 1e-3
            choice = ctx.mode if riding else ON_DEMAND
            if d == 0 and has_spot:
                choice = spot(zone)
        return choice
