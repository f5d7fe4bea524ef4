"""`on_demand`: run on-demand from the first tick to the last (the baseline every saving is
measured against).

Example:

>>> OnDemand().name
'on_demand'
"""

from __future__ import annotations

from spotfit.market.policies.base import ON_DEMAND, BasePolicy, Context, Decision


class OnDemand(BasePolicy):
    name = "on_demand"

    def decide(self, ctx: Context) -> Decision:
        return ON_DEMAND
