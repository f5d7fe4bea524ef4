"""The spot market: traces and their statistics, price catalogs, the simulator, the policies.

Example:

>>> from spotfit.market import Job, load_trace, simulate
>>> trace = load_trace("aws-v100")
>>> simulate("spotfit", trace, Job.from_hours(8, 9), 0, ["us-west-2b"]).met_deadline
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spotfit.market.catalog import CatalogOffer, load_catalog
    from spotfit.market.policies.base import NONE, ON_DEMAND, Context, Decision, Kind, Policy, make_policy, spot
    from spotfit.market.simulator import Job, RunResult, run_grid, simulate, start_ticks, summarize
    from spotfit.market.trace import Trace, ZoneStats, load_trace, resolve_trace, zone_stats
    from spotfit.market.view import MarketView

# Each public name and its module, loaded on first use (PEP 562): importing one light module of the
# market (`spotfit.market.trace_files`, `spotfit.market.job`) loads no NumPy.
_HOMES = {
    "catalog": ("CatalogOffer", "load_catalog"),
    "policies.base": ("NONE", "ON_DEMAND", "Context", "Decision", "Kind", "Policy", "make_policy", "spot"),
    "simulator": ("Job", "RunResult", "run_grid", "simulate", "start_ticks", "summarize"),
    "trace": ("Trace", "ZoneStats", "load_trace", "resolve_trace", "zone_stats"),
    "view": ("MarketView",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "NONE", "ON_DEMAND", "CatalogOffer", "Context", "Decision", "Job", "Kind", "MarketView",
    "Policy", "RunResult", "Trace", "ZoneStats", "load_catalog", "load_trace", "make_policy",
    "resolve_trace", "run_grid", "simulate", "spot", "start_ticks", "summarize", "zone_stats",
]


def __getattr__(name: str) -> Any:
    if name in _HOME_OF:
        return getattr(importlib.import_module(f"{__name__}.{_HOME_OF[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
