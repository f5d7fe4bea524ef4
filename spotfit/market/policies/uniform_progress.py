"""`uniform_progress`: the Uniform Progress policy of "Can't Be Late" (NSDI'24).

Its rules, with cp(t) the progress made and ep(t) = work × t / deadline the uniform line:

1. Uniform progress: when spot is unavailable and cp(t) < ep(t), run on-demand to catch up;
   when ahead, wait.
2. Taking risks: switch to spot whenever it is available, and stay until preempted.
3. Hysteresis: once on on-demand, stay on it until cp(t) >= ep(t + 2d) (d = restart overhead).
4. Safety net: when the time left is under the work left + 2d, run on-demand to the end.

spotfit adds its own safety rule (`safe_off_on_demand`) to rule 4 so that the tick-level
accounting can never make it miss a deadline that on-demand from the start would meet.

Example:

>>> UniformProgress().name
'uniform_progress'
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


class UniformProgress(BasePolicy):
    name = "uniform_progress"

    def __init__(self) -> None:
        self._committed = False

    def reset(self) -> None:
        self._committed = False

    def decide(self, ctx: Context) -> Decision:
        d = ctx.overhead_s
        if self._committed or ctx.time_left_s < ctx.work_left_s + 2 * d:
            self._committed = True
            return ON_DEMAND
        zone = ctx.zones[0]
        available = ctx.market.is_available(zone)
        running_spot = ctx.mode.kind is Kind.SPOT and ctx.mode.zone == zone
        gain = gain_if_continued(ctx) if running_spot else gain_if_launched(ctx) if available else 0.0
        if not safe_off_on_demand(ctx, gain):
            self._committed = True
            return ON_DEMAND
        rate = ctx.work_s / ctx.deadline_s
        if ctx.mode.kind is Kind.ON_DEMAND and ctx.work_done_s < rate * (ctx.now_s + 2 * d):
            return ON_DEMAND
        if available:
            return ctx.mode if running_spot else spot(zone)
        if ctx.work_done_s < rate * ctx.now_s:
            return ON_DEMAND
        return NONE
