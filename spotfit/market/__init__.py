"""The spot market: traces and their statistics, price catalogs, the simulator, the policies.

Example:

>>> from spotfit.market import Job, load_trace, simulate
>>> trace = load_trace("aws-v100")
>>> simulate("spotfit", trace, Job.from_hours(8, 9), 0, ["us-west-2b"]).met_deadline
True
"""

from spotfit.market.catalog import CatalogOffer, load_catalog
from spotfit.market.policies.base import (
    NONE,
    ON_DEMAND,
    Context,
    Decision,
    Kind,
    Policy,
    make_policy,
    spot,
)
from spotfit.market.simulator import Job, RunResult, run_grid, simulate, start_ticks, summarize
from spotfit.market.trace import Trace, ZoneStats, load_trace, resolve_trace, zone_stats
from spotfit.market.view import MarketView

__all__ = [
    "NONE", "ON_DEMAND", "CatalogOffer", "Context", "Decision", "Job", "Kind", "MarketView",
    "Policy", "RunResult", "Trace", "ZoneStats", "load_catalog", "load_trace", "make_policy",
    "resolve_trace", "run_grid", "simulate", "spot", "start_ticks", "summarize", "zone_stats",
]
