"""The planner: catalog offers × market history → ranked places to run a job (pure).

Offers backed by a market trace are simulated with the default policy (`spotfit`) from several
start points of the history, for this job's work and deadline: their expected cost,
preemptions and finish time are means over those replays, and a multi-zone offer (all the
trace's zones together) is added. Offers known only from the price catalog get a plain
estimate: halfway between holding spot throughout and running on-demand throughout, with
unknown preemptions. Everything is ranked by expected cost.

Example:

>>> p = plan("V100", count=1, work_h=10, deadline_h=12, starts=2)
>>> p.offers[0].basis, p.offers[0].policy
('history', 'spotfit')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime

import numpy as np

from spotfit.errors import UsageError
from spotfit.market.catalog import load_catalog
from spotfit.market.policies.base import DEFAULT_POLICY, make_policy
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import Trace, load_trace

# Market history bundled for an (accelerator, count): used when the job names no trace.
DEFAULT_TRACES = {("v100", 1): "aws-v100"}
_DEADLINE_PER_WORK = 1.2  # default deadline (or work) when the job gives only one of them
_CATALOG_ROWS = 8  # catalog-only offers listed after the simulated ones


@dataclass(frozen=True)
class PlanOffer:
    """One ranked place to run, with what the history says it will cost."""

    rank: int
    cloud: str
    region: str
    zones: list[str]
    instance_type: str | None
    spot_usd_per_h: float | None
    on_demand_usd_per_h: float | None
    expected_cost_usd: float
    expected_preemptions: float | None
    finish_h: float
    finish_at: datetime | None
    deadline_met_share: float | None
    policy: str
    basis: str  # "history" (simulated on the trace) or "catalog" (prices only)


@dataclass(frozen=True)
class Plan:
    accelerator: str
    count: int
    work_h: float
    deadline_h: float
    spot: bool
    trace: str | None
    offers: list[PlanOffer] = field(default_factory=list)

    @property
    def recommended(self) -> PlanOffer | None:
        return self.offers[0] if self.offers else None

    def to_json(self) -> dict:
        doc = asdict(self)
        doc["recommended"] = asdict(self.recommended) if self.recommended else None
        return doc


def plan(accelerator: str, count: int = 1, work_h: float | None = None,
         deadline_h: float | None = None, spot: bool = True, trace: str | Trace | None = None,
         zones: list[str] | None = None, start: datetime | None = None,
         overhead_h: float = 0.2, starts: int = 3) -> Plan:
    """Rank the offers for `accelerator` × `count` by expected cost for this job."""
    work_h, deadline_h = _work_and_deadline(work_h, deadline_h)
    job = Job.from_hours(work_h, deadline_h, overhead_h)
    catalog = load_catalog(accelerator=accelerator, count=count)
    if not catalog:
        raise UsageError(f"No catalog offer for accelerator {accelerator!r} × {count}: expected "
                         "an accelerator and count the bundled catalogs list.",
                         hint="Run `spotfit catalog` to see the accelerators and counts offered.")
    if trace is None and spot:
        trace = DEFAULT_TRACES.get((accelerator.lower(), int(count)))
    market = load_trace(trace) if isinstance(trace, str) else trace
    rows: list[dict] = []
    covered: set[str] = set()
    if market is not None and spot:
        market = market.select(zones)
        rows += _history_rows(market, job, catalog, start, starts)
        covered = {_region(z) for z in market.zones}
    rows += _catalog_rows(catalog, job, spot, covered)
    rows.sort(key=lambda r: r["expected_cost_usd"])
    offers = []
    for rank, row in enumerate(rows, start=1):
        finish_at = None
        if start is not None:
            from datetime import timedelta

            finish_at = start + timedelta(hours=row["finish_h"])
        offers.append(PlanOffer(rank=rank, finish_at=finish_at, **row))
    return Plan(accelerator, int(count), work_h, deadline_h, spot,
                market.source if market is not None and spot else None, offers)


def _work_and_deadline(work_h: float | None, deadline_h: float | None) -> tuple[float, float]:
    if work_h is None and deadline_h is None:
        work_h = 1.0  # what a cheapest-offer optimizer assumes when it knows nothing
    if work_h is None:
        assert deadline_h is not None
        work_h = deadline_h / _DEADLINE_PER_WORK
    if deadline_h is None:
        deadline_h = work_h * _DEADLINE_PER_WORK
    return float(work_h), float(deadline_h)


def _region(zone: str) -> str:
    return zone[:-1] if zone[-1:].isalpha() and zone[-2:-1].isdigit() else zone


def _history_rows(market: Trace, job: Job, catalog, start: datetime | None, starts: int) -> list[dict]:
    last = market.n_ticks
    if start is not None:  # plan from the history before the job's start only
        seen = int((start - market.start).total_seconds() // market.gap_s)
        last = max(0, min(last, seen))
    usable = _truncate(market, last)
    ticks = start_ticks(usable, job, starts)
    policy = make_policy(DEFAULT_POLICY)
    groups = [(z,) for z in usable.zones] + ([usable.zones] if len(usable.zones) > 1 else [])
    rows = []
    for group in groups:
        runs = [simulate(policy, usable, job, s, group) for s in ticks]
        region = _region(group[0]) if len(group) == 1 else "*"
        match = [o for o in catalog if o.region == region] or catalog
        rows_idx = [usable.zone_index(z) for z in group]
        rows.append(dict(
            cloud=match[0].cloud if region != "*" else "aws",
            region=region,
            zones=list(group),
            instance_type=match[0].instance_type,
            spot_usd_per_h=float(np.mean(usable.spot_usd_per_h[rows_idx, -1])),
            on_demand_usd_per_h=float(np.min(usable.on_demand_usd_per_h[rows_idx, -1])),
            expected_cost_usd=float(np.mean([r.cost_usd for r in runs])),
            expected_preemptions=float(np.mean([r.preemptions for r in runs])),
            finish_h=float(np.mean([r.finish_h for r in runs])),
            deadline_met_share=float(np.mean([r.met_deadline for r in runs])),
            policy=DEFAULT_POLICY,
            basis="history",
        ))
    return rows


def _truncate(market: Trace, n: int) -> Trace:
    return Trace(market.zones, market.gap_s, market.start, market.available[:, :n],
                 market.spot_usd_per_h[:, :n], market.on_demand_usd_per_h[:, :n], market.source)


def _catalog_rows(catalog, job: Job, spot: bool, covered: set[str]) -> list[dict]:
    hours = (job.work_s + job.overhead_s) / 3600.0
    rows = []
    for o in catalog:
        if o.region in covered or o.on_demand_usd_per_h is None:
            continue
        on_demand = o.on_demand_usd_per_h * hours
        use_spot = spot and o.spot_usd_per_h is not None
        expected = (o.spot_usd_per_h * hours + on_demand) / 2 if use_spot else on_demand
        rows.append(dict(
            cloud=o.cloud, region=o.region, zones=[o.zone] if o.zone else [],
            instance_type=o.instance_type, spot_usd_per_h=o.spot_usd_per_h,
            on_demand_usd_per_h=o.on_demand_usd_per_h, expected_cost_usd=expected,
            expected_preemptions=None, finish_h=hours, deadline_met_share=None,
            policy=DEFAULT_POLICY if use_spot else "on_demand", basis="catalog",
        ))
    rows.sort(key=lambda r: r["expected_cost_usd"])
    return rows[:_CATALOG_ROWS]
