"""`greedy`: spot whenever it is available, otherwise wait, until slack forces on-demand for good.

This is what "relaunch on preemption" tools do, plus the one safety rule that keeps the
deadline: once waiting one more tick could leave too little time to finish on on-demand, the
job goes on-demand and stays there.

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
    gain_if_continued,
    gain_if_launched,
    safe_off_on_demand,
    spot,
)


class Greedy(BasePolicy):
    name = "greedy"

    def __init__(self) -> None:
        self._committed = False

    def reset(self) -> None:
        self._committed = False

    def decide(self, ctx: Context) -> Decision:
        if self._committed:
            return ON_DEMAND
        zone = ctx.zones[0]
        if ctx.market.is_available(zone):
            running = ctx.mode.kind is Kind.SPOT and ctx.mode.zone == zone
            gain = gain_if_continued(ctx) if running else gain_if_launched(ctx)
            if safe_off_on_demand(ctx, gain):
                return ctx.mode if running else spot(zone)
        elif safe_off_on_demand(ctx, 0.0):
            return NONE
        self._committed = True
        return ON_DEMAND
