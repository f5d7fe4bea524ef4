"""The planner: catalog offers × market history → ranked places to run a job (pure).

Two kinds of offers, ranked together by expected cost and shown apart (`basis`):

- `history`: offers whose instance type the market trace records are replayed with the job's
  policy from several start points of the history, for this job's work and deadline; their
  expected cost, preemptions and finish time are means over those replays; the risk is shown
  beside them: the cost's 10th and 90th percentiles and worst over the replays, and the share
  of replays that cost more than all-on-demand from the same start. A multi-zone offer (the
  matched zones together) is added for a multi-zone policy.
- `catalog`: every other offer has catalog prices only. Its expected cost assumes spot can be
  had a share `AVAILABILITY_PRIOR` of the time and on-demand runs the rest (one start-up
  overhead, unknown preemptions). The prior is the lowest spot availability of any zone in the
  bundled history (us-east-1a, AWS p3.2xlarge, Feb-Apr 2023: 17%): conservative, so an offer
  without history wins only when its prices beat the simulated offers by that much.

A trace records one instance type. It prices an offer only when, in the offer's region, the
trace's on-demand price matches the catalog's for the job's accelerator × count (within
`_PRICE_MATCH`): the V100 trace never prices an A100 offer, and every zone it records no offer
for is left out. Offers on clouds spotfit cannot launch on (no backend of that name) are
marked `launchable=False` and recommended only with `all_clouds=True`. GCP GPU-attachment rows
(host VM not priced) are left out, with a note.

Example:

>>> p = plan("V100", count=1, work_h=10, deadline_h=12, starts=2)
>>> p.recommended.basis, p.recommended.policy, p.recommended.launchable
('history', 'mdp', True)
>>> a100 = plan("A100", count=8, work_h=10, deadline_h=12, trace="aws-v100")
>>> {o.basis for o in a100.offers}, a100.recommended.instance_type
({'catalog'}, 'p4d.24xlarge')
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from spotfit.errors import UsageError
from spotfit.market.catalog import CATALOGS, CatalogOffer, load_catalog
from spotfit.market.policies.base import ALIASES, DEFAULT_MAX_OVERPAY, DEFAULT_POLICY, POLICIES, make_policy
from spotfit.market.simulator import Job, check_ticks, simulate, start_ticks
from spotfit.market.trace import Trace, load_trace

# Market history bundled for an (accelerator, count): used when the job names no trace.
DEFAULT_TRACES = {("v100", 1): "aws-v100"}
AVAILABILITY_PRIOR = 0.17  # lowest zone availability in the bundled history (see the module doc)
_DEADLINE_PER_WORK = 1.2  # default deadline (or work) when the job gives only one of them
_CATALOG_ROWS = 8  # catalog-only offers listed (plus the cheapest of each cloud not launchable)
_PRICE_MATCH = 0.05  # relative on-demand difference within which a trace records an offer


def launchable_clouds() -> list[str]:
    """Clouds of the catalogs that a registered backend launches on."""
    from spotfit.core.registry import registered_backends

    return [c for c in CATALOGS if c in registered_backends()]


@dataclass(frozen=True)
class PlanOffer:
    """One ranked place to run, with what the history (or the prior) says it will cost."""

    rank: int
    cloud: str
    region: str
    zones: list[str]
    instance_type: str | None
    spot_usd_per_h: float | None
    on_demand_usd_per_h: float | None
    expected_cost_usd: float
    cost_p10_usd: float | None  # over the history windows simulated (None: a catalog offer)
    cost_p90_usd: float | None
    worst_cost_usd: float | None
    above_on_demand_share: float | None  # windows that cost more than all-on-demand in the same window
    expected_preemptions: float | None
    finish_h: float
    finish_at: datetime | None
    deadline_met_share: float | None
    policy: str
    basis: str  # "history" (simulated on the trace) or "catalog" (prices and the prior)
    availability_prior: float | None  # the spot share assumed by a catalog offer
    launchable: bool  # a backend can launch on this cloud


@dataclass(frozen=True)
class Plan:
    accelerator: str
    count: int
    work_h: float
    deadline_h: float
    spot: bool
    trace: str | None  # the trace replayed, None when no offer was simulated
    policy: str
    availability_prior: float
    all_clouds: bool
    launchable_clouds: list[str]
    offers: list[PlanOffer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def recommended(self) -> PlanOffer | None:
        """The cheapest offer spotfit can launch (of any cloud with `all_clouds`)."""
        return next((o for o in self.offers if o.launchable or self.all_clouds), None)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["recommended"] = asdict(self.recommended) if self.recommended else None
        return doc


def plan(accelerator: str, count: int = 1, work_h: float | None = None,
         deadline_h: float | None = None, spot: bool = True, trace: str | Trace | None = None,
         zones: list[str] | None = None, start: datetime | None = None,
         overhead_h: float = 0.2, starts: int = 3, policy: str = DEFAULT_POLICY,
         all_clouds: bool = False, trace_required: bool = False,
         max_overpay: float = DEFAULT_MAX_OVERPAY) -> Plan:
    """Rank the offers for `accelerator` × `count` by expected cost for this job.

    `trace_required`: the trace was asked for explicitly (`plan --trace`), so a trace that
    records no offer of this accelerator is an error rather than a note.
    """
    policy = _online_policy(policy)
    work_h, deadline_h = _work_and_deadline(work_h, deadline_h)
    job = Job.from_hours(work_h, deadline_h, overhead_h, max_overpay)
    catalog = load_catalog(accelerator=accelerator, count=count)
    if not catalog:
        raise UsageError(f"No catalog offer for accelerator {accelerator!r} × {count}: expected "
                         "an accelerator and count the bundled catalogs list.",
                         hint="Run `spotfit catalog` to see the accelerators and counts offered.")
    notes = []
    gpu_only = [o for o in catalog if not o.vm_included]
    catalog = [o for o in catalog if o.vm_included]
    if gpu_only:
        notes.append(f"{len(gpu_only)} GCP offer(s) left out: the catalogs price their GPU attachment "
                     "only, not the host VM")
    if trace is None and spot:
        trace = DEFAULT_TRACES.get((accelerator.lower(), int(count)))
    market = load_trace(trace) if isinstance(trace, str) else trace
    rows: list[dict[str, Any]] = []
    recorded: dict[str, CatalogOffer] = {}
    if market is not None and spot:
        market = market.select(zones)
        recorded = _recorded_offers(market, catalog)
        if recorded:
            rows += _history_rows(market, job, recorded, start, starts, policy)
        elif trace_required:
            raise UsageError(_no_record(market, catalog, accelerator, count) + "; expected a trace of the "
                             "job's instance type.", hint="Plan without --trace (offers then carry catalog "
                             "prices and the availability prior), or record a trace of that instance type.")
        else:
            notes.append(_no_record(market, catalog, accelerator, count) + ": not replayed; offers carry "
                         f"catalog prices and the {AVAILABILITY_PRIOR:.0%} availability prior")
    elif market is not None:
        notes.append("`resources.spot: false`: every offer runs on-demand, the trace is not replayed")
    launchable = launchable_clouds()
    simulated = {(o.cloud, o.region, o.instance_type) for o in recorded.values()}
    rows += _catalog_rows([o for o in catalog if (o.cloud, o.region, o.instance_type) not in simulated],
                          job, spot, policy, launchable, all_clouds)
    rows.sort(key=lambda r: r["expected_cost_usd"])
    offers = [PlanOffer(rank=rank, finish_at=start + timedelta(hours=row["finish_h"]) if start else None, **row)
              for rank, row in enumerate(rows, start=1)]
    return Plan(accelerator, int(count), work_h, deadline_h, spot,
                market.source if market is not None and recorded else None, policy if spot else "on_demand",
                AVAILABILITY_PRIOR, all_clouds, launchable, offers, notes)


def _online_policy(name: str) -> str:
    """The registry name of `name`; unknown names and the offline optimum are usage errors."""
    resolved = ALIASES.get(name, name)
    valid = sorted(n for n in [*POLICIES, *ALIASES]
                   if not getattr(make_policy(n), "offline", False))
    if resolved not in POLICIES:
        raise UsageError(f"Invalid `market.policy`: received {name!r}, expected one of {', '.join(valid)}.",
                         hint=f"Set `market.policy: default` (= {DEFAULT_POLICY}) in the job spec.")
    if getattr(make_policy(resolved), "offline", False):
        raise UsageError(f"Invalid `market.policy`: received {name!r}, an offline bound computed on the whole "
                         f"trace that no job can run; expected one of {', '.join(valid)}.",
                         hint="Set `market.policy: default`; `spotfit cost JOB` compares a job with the optimum.")
    return resolved


def _work_and_deadline(work_h: float | None, deadline_h: float | None) -> tuple[float, float]:
    if work_h is None and deadline_h is None:
        work_h = 1.0  # what a cheapest-offer optimizer assumes when it knows nothing
    if work_h is None:
        assert deadline_h is not None
        work_h = deadline_h / _DEADLINE_PER_WORK
    if deadline_h is None:
        deadline_h = work_h * _DEADLINE_PER_WORK
    return float(work_h), float(deadline_h)


def region_of(zone: str) -> str:
    """The region of a zone name: `us-east-1a` → `us-east-1`, `us-central1-a` → `us-central1`."""
    if zone[-2:-1] == "-" and zone[-1:].isalpha():
        return zone[:-2]
    return zone[:-1] if zone[-1:].isalpha() and zone[-2:-1].isdigit() else zone


def _recorded_offers(market: Trace, catalog: list[CatalogOffer]) -> dict[str, CatalogOffer]:
    """Zone → the catalog offer the trace records there (same region, on-demand price matches)."""
    out = {}
    for i, zone in enumerate(market.zones):
        trace_od = float(np.median(market.on_demand_usd_per_h[i]))
        gaps = [(abs(o.on_demand_usd_per_h - trace_od), n, o) for n, o in enumerate(catalog)
                if o.on_demand_usd_per_h is not None and o.region == region_of(zone)]
        if gaps:
            gap, _, best = min(gaps)
            if gap <= _PRICE_MATCH * trace_od:
                out[zone] = best
    return out


def _no_record(market: Trace, catalog: list[CatalogOffer], accelerator: str, count: int) -> str:
    regions = sorted({region_of(z) for z in market.zones})
    trace_od = float(np.median(market.on_demand_usd_per_h))
    there = sorted({f"{o.instance_type or o.cloud} ${o.on_demand_usd_per_h:g}/h" for o in catalog
                    if o.region in regions and o.on_demand_usd_per_h})
    name = Path(market.source).name if market.source else "<memory>"
    return (f"trace {name} records no {accelerator}×{count} offer: its on-demand "
            f"${trace_od:g}/h in {', '.join(regions)} matches none of the catalog's "
            f"({', '.join(there[:3]) or 'none in those regions'})")


def _history_rows(market: Trace, job: Job, recorded: dict[str, CatalogOffer], start: datetime | None,
                  starts: int, policy_name: str) -> list[dict[str, Any]]:
    usable = _before(market.select(list(recorded)), start, job)
    ticks = start_ticks(usable, job, starts)
    policy = make_policy(policy_name)
    launchable = launchable_clouds()
    groups: list[tuple[str, ...]] = [(z,) for z in usable.zones]
    if len(usable.zones) > 1 and policy.multi_zone:
        groups.append(usable.zones)
    check_ticks(job, usable.gap_s, 2 * len(groups) * len(ticks))  # the policy and on-demand, each start
    rows = []
    for group in groups:
        runs = [simulate(policy, usable, job, s, group) for s in ticks]
        costs = np.array([r.cost_usd for r in runs])
        on_demand = np.array([simulate("on_demand", usable, job, s, group).cost_usd for s in ticks])
        offer = recorded[group[0]]
        rows_idx = [usable.zone_index(z) for z in group]
        rows.append(dict(
            cloud=offer.cloud,
            region=offer.region if len({recorded[z].region for z in group}) == 1 else "*",
            zones=list(group),
            instance_type=offer.instance_type,
            spot_usd_per_h=float(np.mean(usable.spot_usd_per_h[rows_idx, -1])),
            on_demand_usd_per_h=float(np.min(usable.on_demand_usd_per_h[rows_idx, -1])),
            expected_cost_usd=float(np.mean(costs)),
            cost_p10_usd=float(np.percentile(costs, 10)),
            cost_p90_usd=float(np.percentile(costs, 90)),
            worst_cost_usd=float(np.max(costs)),
            above_on_demand_share=float(np.mean(costs > on_demand + 1e-9)),
            expected_preemptions=float(np.mean([r.preemptions for r in runs])),
            finish_h=float(np.mean([r.finish_h for r in runs])),
            deadline_met_share=float(np.mean([r.met_deadline for r in runs])),
            policy=policy_name,
            basis="history",
            availability_prior=None,
            launchable=offer.cloud in launchable,
        ))
    return rows


def _before(market: Trace, start: datetime | None, job: Job) -> Trace:
    """The history before the job's start (all of it without a start); the start must lie in the trace."""
    if start is None:
        return market
    first = _utc(market.start)
    last = first + timedelta(seconds=market.gap_s * (market.n_ticks - 1))
    if not first <= _utc(start) <= last:
        raise UsageError(f"Invalid `market.start`: received {start.isoformat()}, expected a time inside the trace "
                         f"{market.source or '<memory>'} ({first:%Y-%m-%d %H:%M} .. {last:%Y-%m-%d %H:%M} UTC).",
                         hint="Pick a start inside the trace, or leave `market.start` out to plan from all of it.")
    seen = int((_utc(start) - first).total_seconds() // market.gap_s)
    if seen * market.gap_s < job.deadline_s:
        raise UsageError(f"Invalid `market.start`: received {start.isoformat()}, only {seen * market.gap_s / 3600:.1f} "
                         f"h into the trace; expected at least the deadline ({job.deadline_s / 3600:g} h) of "
                         "history before it to plan from.",
                         hint="Pick a later `market.start`, or leave it out to plan from the whole trace.")
    return Trace(market.zones, market.gap_s, market.start, market.available[:, :seen],
                 market.spot_usd_per_h[:, :seen], market.on_demand_usd_per_h[:, :seen], market.source)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _catalog_rows(catalog: list[CatalogOffer], job: Job, spot: bool, policy: str, launchable: list[str],
                  all_clouds: bool) -> list[dict[str, Any]]:
    hours = (job.work_s + job.overhead_s) / 3600.0
    rows: list[dict[str, Any]] = []
    for o in catalog:
        if o.on_demand_usd_per_h is None:
            continue
        spot_price = o.spot_usd_per_h if spot else None
        use_spot = spot_price is not None
        rate = o.on_demand_usd_per_h
        if spot_price is not None:
            rate = AVAILABILITY_PRIOR * spot_price + (1 - AVAILABILITY_PRIOR) * o.on_demand_usd_per_h
        rows.append(dict(
            cloud=o.cloud, region=o.region, zones=[o.zone] if o.zone else [],
            instance_type=o.instance_type, spot_usd_per_h=o.spot_usd_per_h,
            on_demand_usd_per_h=o.on_demand_usd_per_h, expected_cost_usd=rate * hours,
            cost_p10_usd=None, cost_p90_usd=None, worst_cost_usd=None, above_on_demand_share=None,
            expected_preemptions=None, finish_h=hours, deadline_met_share=None,
            policy=policy if use_spot else "on_demand", basis="catalog",
            availability_prior=AVAILABILITY_PRIOR if use_spot else None, launchable=o.cloud in launchable,
        ))
    rows.sort(key=lambda r: r["expected_cost_usd"])
    if all_clouds:
        return rows[:_CATALOG_ROWS]
    shown = [r for r in rows if r["launchable"]][:_CATALOG_ROWS]
    for cloud in sorted({r["cloud"] for r in rows} - set(launchable)):  # for comparison, marked
        shown.append(next(r for r in rows if r["cloud"] == cloud))
    return shown
