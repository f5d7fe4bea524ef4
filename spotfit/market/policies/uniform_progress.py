"""`uniform_progress`: the Uniform Progress policy of "Can't Be Late" (NSDI'24), as its
published simulator runs it.

With cp(t) the progress made and ep(t) = work × t / deadline the uniform line, d the restart
overhead, and the rules applied in this order (a later rule overrides an earlier one):

1. Taking risks: run spot whenever it is available (stay on it until preempted), else wait.
2. Uniform progress: when behind (cp(t) < ep(t)) and spot is down, run on-demand.
3. Hysteresis: on on-demand, stay on it while spot is down or cp(t) < ep(t + 2d).
4. Safety net: when idle or on on-demand and the time left is at most the work left + 2d,
   run on-demand.
5. Last moment: when the time left is at most the work left + d, run on-demand, except that
   a spot instance that has paid its start-up rides on until it is preempted.

Times in rules 4 and 5 are counted in whole ticks as the published simulator counts them: the
time left rounded down, the work left plus overheads rounded up. Nothing is added to these
rules, so that the figures of this baseline compare with the paper's.

Several zones: spot is available when any zone is up; a spot launch goes to the cheapest up
zone and rides until that zone goes down (`cheapest_spot`). `uniform_progress_first` is the
multi-region Uniform Progress of the ADRS study's starting program as published: a launch goes to
the first up zone in the job's order (`first_spot`). With one zone both are the policy above.

Example:

>>> UniformProgress().name, UniformProgressFirst().name
('uniform_progress', 'uniform_progress_first')
"""

from __future__ import annotations

from typing import ClassVar

from spotfit.market.policies.base import (
    NONE,
    ON_DEMAND,
    BasePolicy,
    Context,
    Decision,
    Kind,
    cheapest_spot,
    deadline_safety,
    first_spot,
)


class UniformProgress(BasePolicy):
    name = "uniform_progress"
    multi_zone = True
    pick_spot: ClassVar = staticmethod(cheapest_spot)

    def decide(self, ctx: Context) -> Decision:
        spot_choice = self.pick_spot(ctx)
        has_spot = spot_choice is not None
        mode = ctx.mode.kind
        rate = ctx.work_s / ctx.deadline_s
        d = ctx.overhead_s
        choice = spot_choice or NONE
        if not has_spot and ctx.work_done_s < rate * ctx.now_s:
            choice = ON_DEMAND
        if mode is Kind.ON_DEMAND and (not has_spot or ctx.work_done_s < rate * (ctx.now_s + 2 * d)):
            choice = ON_DEMAND
        return deadline_safety(ctx, choice, spot_choice)


class UniformProgressFirst(UniformProgress):
    """`uniform_progress` launching in the first up zone of the job's order (the published
    multi-region starting program)."""

    name = "uniform_progress_first"
    pick_spot: ClassVar = staticmethod(first_spot)
