"""The market verbs: where to run (`plan`), the price catalogs, trace replays, live price records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spotfit.core import arguments
from spotfit.errors import UsageError
from spotfit.sdk.context import db

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec

MAX_STARTS = 1_000  # start ticks of `simulate`: beyond this the replays take hours and say nothing new


def plan(path: str, trace: str | None = None, all_clouds: bool = False) -> dict[str, Any]:
    """Rank where to run the job spec at `path`: expected cost, preemptions, finish (`spotfit plan`).

    `trace` replaces the spec's `market.trace` (a bundled name or a file in any format
    `load_trace` reads); it must record the job's accelerator. `all_clouds` lets the
    recommendation go to a cloud spotfit cannot launch on.
    """
    from spotfit.spec.job import load_spec

    return plan_spec(load_spec(path, check_script=False), trace, all_clouds)


def plan_spec(spec: JobSpec, trace: str | None = None, all_clouds: bool = False) -> dict[str, Any]:
    """`plan` of a spec already validated (the dashboard's: posted content, or a job's recorded spec)."""
    from spotfit.market import offers
    from spotfit.market.trace import load_trace

    res, market = spec.resources, spec.market
    if trace is not None:
        arguments.text("--trace", trace, expected="a trace file or a bundled trace name, e.g. aws-v100",
                       hint="Pass --trace aws-v100 or a path to a trace CSV(.gz).")
    name = trace if trace is not None else market.trace
    history = load_trace(name, gap_s=market.gap_s) if name else None
    return offers.plan(
        accelerator=res.accelerator,
        count=res.count,
        work_h=spec.work_h,
        deadline_h=spec.deadline_h,
        spot=res.spot,
        trace=history,
        zones=list(market.zones or []) or None,
        start=market.start,
        overhead_h=market.overhead_h,
        max_overpay=market.max_overpay,
        policy=market.policy,
        all_clouds=all_clouds,
        trace_required=trace is not None,
    ).to_json()


def catalog(accelerator: str | None = None, count: float | None = None, cloud: str | None = None,
            region: str | None = None, spot: bool = False) -> dict[str, Any]:
    """GPU offers of the bundled price catalogs, cheapest first (`spotfit catalog`)."""
    from spotfit.market.catalog import load_catalog

    if count is not None:
        arguments.number("--count", count, low=1, high=16, hint="Pass --count 1 (or 2, 4, 8).")
        if not float(count).is_integer():  # a fraction matches no offer: say so rather than list none
            raise UsageError(f"Invalid `--count`: received {count!r}, expected a whole number of accelerators "
                             "per instance.", hint="Pass --count 1 (or 2, 4, 8).")
    everything = load_catalog()
    accelerators = sorted({o.accelerator for o in everything})
    if accelerator is not None and accelerator.lower() not in {a.lower() for a in accelerators}:
        raise UsageError(f"Invalid `--accelerator`: received {accelerator!r}, expected one the bundled catalogs "
                         f"list: {', '.join(accelerators)}.", hint="Pass --accelerator V100, or leave it out.")
    if region is not None and region not in {o.region for o in everything}:
        raise UsageError(f"Invalid `--region`: received {region!r}, expected a region the bundled catalogs list, "
                         "e.g. us-east-1.", hint="Run `spotfit catalog` without --region to see them all.")
    offers = load_catalog(accelerator=accelerator, count=count, cloud=cloud, region=region, spot=spot)
    return {"offers": [o.to_json() for o in offers]}


def simulate(trace: str = "aws-v100", work_h: float = 48.0, deadline_h: float = 52.0, overhead_h: float = 0.2,
             zones: list[str] | None = None, starts: int = 6, policy: str = "all",
             gap_s: int | None = None, max_overpay: float = 0.1) -> dict[str, Any]:
    """Replay a trace: what each policy pays and whether it meets the deadline (`spotfit simulate`).

    `max_overpay` is `market.max_overpay`: the default policy's floor (the others have none)."""
    from spotfit.market.policies.base import DEFAULT_POLICY, POLICIES
    from spotfit.market.simulator import Job, run_grid, summarize
    from spotfit.market.trace import load_trace
    from spotfit.spec.sections import MAX_HOURS

    policy = DEFAULT_POLICY if policy == "default" else policy  # as `market.policy: default` means
    if policy != "all" and policy not in POLICIES:
        raise UsageError(f"Invalid `--policy`: received {policy!r}, expected 'all', 'default' or one of "
                         f"{', '.join(sorted(POLICIES))}.", hint=f"Pass --policy {DEFAULT_POLICY}.")
    for flag, hours, default in (("--work-h", work_h, 48), ("--deadline-h", deadline_h, 52)):
        arguments.number(flag, hours, low=0, high=MAX_HOURS, low_open=True, hint=f"Pass {flag} {default} (hours).")
    arguments.number("--overhead-h", overhead_h, low=0, high=MAX_HOURS, hint="Pass --overhead-h 0.2 (hours).")
    arguments.number("--starts", starts, low=1, high=MAX_STARTS, hint="Pass --starts 6.")
    arguments.number("--max-overpay", max_overpay, low=0, high=10, hint="Pass --max-overpay 0.1 (10% above "
                     "all-on-demand at most) or 0 (never above it, in the policy's model).")
    if gap_s is not None:
        arguments.number("--gap-s", gap_s, low=60, high=86_400, hint="Leave --gap-s out to infer it from the trace.")
    for zone in zones or []:
        arguments.text("--zones", zone, hint="Leave --zones out to use every zone of the trace.",
                       expected="a zone of the trace, e.g. us-east-1a")
    names = list(POLICIES) if policy == "all" else [policy]
    market = load_trace(trace, gap_s=gap_s)
    runs = run_grid(market, Job.from_hours(work_h, deadline_h, overhead_h, max_overpay), names, starts, zones)
    return {"default_policy": DEFAULT_POLICY, "trace": market.source, "runs": [r.to_json() for r in runs],
            "summary": summarize(runs)}



def market_record(region: str, instance_type: str, zones: list[str] | None = None, trace: str | None = None,
                  hours: float = 24.0, gap_s: int = 300, cloud: str | None = None) -> dict[str, Any]:
    """Append `instance_type`'s live market in `region` to a trace file (`spotfit market record`).

    `cloud` is a backend whose cloud publishes its spot prices (`MarketRecorder`: aws, gcp); by
    default the one whose regions `region` names (us-east-1: aws, us-central1: gcp).
    """
    from spotfit.backends.base import MarketRecorder, able_backend, backend_class, make_backend
    from spotfit.core.registry import registered_backends

    arguments.number("--gap-s", gap_s, low=60, high=86400, hint="Pass --gap-s 300 (five minutes).")
    if cloud is None:
        recorders = [make_backend(n) for n in registered_backends() if issubclass(backend_class(n), MarketRecorder)]
        owners = [r.name for r in recorders if isinstance(r, MarketRecorder) and r.owns_place(region)]
        cloud = owners[0] if len(owners) == 1 else None
    recorder = make_backend(able_backend(cloud, MarketRecorder, "record a live spot market", flag="--cloud"))
    assert isinstance(recorder, MarketRecorder)
    return recorder.record_market(region, instance_type, trace or f"{instance_type}_{region}.csv", zones, hours,
                                  gap_s, db())
