"""CLI verbs over the market: `simulate`, `catalog`, `plan` (parse → one call → render)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from spotfit.cli.app import app, console, print_json
from spotfit.errors import UsageError
from spotfit.market.catalog import load_catalog
from spotfit.market.policies.base import DEFAULT_POLICY, POLICIES
from spotfit.market.simulator import Job, run_grid, summarize
from spotfit.market.trace import load_trace


@app.command()
def simulate(
    trace: str = typer.Option("aws-v100", "--trace", help="Trace CSV(.gz) path or bundled name."),
    work_h: float = typer.Option(48.0, "--work-h", help="Hours of work the job needs."),
    deadline_h: float = typer.Option(52.0, "--deadline-h", help="Hours from start to deadline."),
    overhead_h: float = typer.Option(0.2, "--overhead-h", help="Start-up hours of every launch."),
    zones: Optional[list[str]] = typer.Option(None, "--zones", help="Zones to use (repeatable)."),
    starts: int = typer.Option(6, "--starts", help="Start ticks evenly spaced over the trace."),
    policy: str = typer.Option("all", "--policy", help="A policy name, or 'all'."),
    gap_s: Optional[int] = typer.Option(None, "--gap-s", help="Tick length; inferred if omitted."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Replay the trace: what each policy pays, and whether it meets the deadline."""
    if policy != "all" and policy not in POLICIES:
        raise UsageError(f"Invalid `--policy`: received {policy!r}, expected 'all' or one of "
                         f"{', '.join(sorted(POLICIES))}.", hint=f"Pass --policy {DEFAULT_POLICY}.")
    names = list(POLICIES) if policy == "all" else [policy]
    market = load_trace(trace, gap_s=gap_s)
    job = Job.from_hours(work_h, deadline_h, overhead_h)
    runs = run_grid(market, job, names, starts, zones)
    summary = summarize(runs)
    if as_json:
        print_json({"default_policy": DEFAULT_POLICY, "runs": [r.to_json() for r in runs],
                    "summary": summary})
        return
    table = Table(title=f"{Path(market.source).name}: {work_h:g} h work, {deadline_h:g} h deadline, "
                        f"{overhead_h:g} h overhead, {starts} starts")
    for col in ("policy", "scope", "runs", "mean $", "× optimum (mean)", "× optimum (worst)",
                "misses", "launches"):
        table.add_column(col, justify="left" if col in ("policy", "scope") else "right")
    for s in summary:
        table.add_row(s["policy"], s["scope"], str(s["runs"]), f"{s['mean_cost_usd']:.2f}",
                      _ratio(s["mean_ratio_to_optimum"]), _ratio(s["worst_ratio_to_optimum"]),
                      str(s["misses"]), f"{s['mean_launches']:.1f}")
    console.print(table)


@app.command()
def catalog(
    accelerator: Optional[str] = typer.Option(None, "--accelerator", help="e.g. V100, A100."),
    count: Optional[float] = typer.Option(None, "--count", help="Accelerators per instance."),
    cloud: Optional[str] = typer.Option(None, "--cloud", help="aws, gcp or azure."),
    region: Optional[str] = typer.Option(None, "--region", help="e.g. us-east-1."),
    spot: bool = typer.Option(False, "--spot", help="Only offers with a spot price, by spot price."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """List GPU offers from the bundled price catalogs, cheapest first."""
    offers = load_catalog(accelerator=accelerator, count=count, cloud=cloud, region=region, spot=spot)
    if as_json:
        print_json({"offers": [o.to_json() for o in offers]})
        return
    table = Table(title=f"{len(offers)} offers")
    for col in ("cloud", "region", "zone", "instance", "accelerator", "on-demand $/h", "spot $/h"):
        table.add_column(col)
    for o in offers:
        table.add_row(o.cloud, o.region, o.zone or "", o.instance_type or "",
                      f"{o.accelerator}×{o.count:g}", _money(o.on_demand_usd_per_h),
                      _money(o.spot_usd_per_h))
    console.print(table)


@app.command()
def plan(
    job_file: Path = typer.Argument(..., help="The job spec (YAML)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Rank where to run a job: expected cost, preemptions and finish time from history."""
    from spotfit.market import offers
    from spotfit.spec import load_spec

    spec = load_spec(job_file, check_script=False)
    res, market = spec.resources, spec.market
    history = load_trace(market.trace, gap_s=market.gap_s) if market.trace else None
    result = offers.plan(
        accelerator=res.accelerator,
        count=res.count,
        work_h=spec.work_h,
        deadline_h=spec.deadline_h,
        spot=res.spot,
        trace=history,
        zones=list(market.zones or []) or None,
        start=market.start,
        overhead_h=market.overhead_h,
    )
    if as_json:
        print_json(result.to_json())
        return
    table = Table(title=f"{result.accelerator}×{result.count}: {result.work_h:g} h work, "
                        f"{result.deadline_h:g} h deadline")
    for col in ("#", "cloud", "region", "zones", "spot $/h", "expected $", "preemptions",
                "finish h", "policy", "basis"):
        table.add_column(col)
    for o in result.offers:
        zones = "all" if len(o.zones) > 3 else ",".join(o.zones)
        pre = "?" if o.expected_preemptions is None else f"{o.expected_preemptions:.1f}"
        table.add_row(str(o.rank), o.cloud, o.region, zones, _money(o.spot_usd_per_h),
                      f"{o.expected_cost_usd:.2f}", pre, f"{o.finish_h:.1f}", o.policy, o.basis)
    console.print(table)
    if result.recommended:
        rec = asdict(result.recommended)
        console.print(f"recommended: {rec['cloud']} {rec['region']} "
                      f"({', '.join(rec['zones']) or 'any zone'}) with policy {rec['policy']}")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
