"""CLI verbs over the market: `simulate`, `catalog`, `plan` (parse → one call → render)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, app, console, print_json


@app.command()
def simulate(
    trace: Annotated[str, typer.Option("--trace", help="Trace CSV(.gz) path or bundled name.")] = "aws-v100",
    work_h: Annotated[float, typer.Option("--work-h", help="Hours of work the job needs.")] = 48.0,
    deadline_h: Annotated[float, typer.Option("--deadline-h", help="Hours from start to deadline.")] = 52.0,
    overhead_h: Annotated[float, typer.Option("--overhead-h", help="Start-up hours of every launch.")] = 0.2,
    zones: Annotated[list[str] | None, typer.Option(
        "--zones", help="Zones to use: repeat the flag or separate them by commas.")] = None,
    starts: Annotated[int, typer.Option("--starts", help="Start ticks evenly spaced over the trace.")] = 6,
    policy: Annotated[str, typer.Option("--policy", help="A policy name, 'default', or 'all'.")] = "all",
    gap_s: Annotated[int | None, typer.Option("--gap-s", help="Tick length; inferred if omitted.")] = None,
    max_overpay: Annotated[float, typer.Option(
        "--max-overpay", help="The default policy's floor: at most this share above all-on-demand.")] = 0.1,
    json_: JsonFlag = False,
) -> None:
    """Replay the trace: what each policy pays, and whether it meets the deadline."""
    if zones is not None:
        zones = [zone.strip() for given in zones for zone in given.split(",")]
    doc = sdk.simulate(trace, work_h=work_h, deadline_h=deadline_h, overhead_h=overhead_h, zones=zones,
                       starts=starts, policy=policy, gap_s=gap_s, max_overpay=max_overpay)
    if json_:
        print_json(doc)
    else:
        console.print(render.simulate_table(doc, work_h, deadline_h, overhead_h, starts))


@app.command()
def catalog(
    accelerator: Annotated[str | None, typer.Option("--accelerator", help="e.g. V100, A100.")] = None,
    count: Annotated[float | None, typer.Option("--count", help="Accelerators per instance.")] = None,
    cloud: Annotated[str | None, typer.Option("--cloud", help="aws, gcp or azure.")] = None,
    region: Annotated[str | None, typer.Option("--region", help="e.g. us-east-1.")] = None,
    spot: Annotated[bool, typer.Option("--spot", help="Only offers with a spot price, by spot price.")] = False,
    json_: JsonFlag = False,
) -> None:
    """List GPU offers from the bundled price catalogs, cheapest first."""
    doc = sdk.catalog(accelerator=accelerator, count=count, cloud=cloud, region=region, spot=spot)
    if json_:
        print_json(doc)
    else:
        console.print(render.catalog_table(doc))


@app.command()
def plan(
    job_file: Annotated[Path, typer.Argument(help="The job spec (YAML).")],
    trace: Annotated[str | None, typer.Option(
        "--trace", help="Market history to simulate instead of the spec's market.trace (file or bundled name); "
                        "it must record the job's accelerator.")] = None,
    all_clouds: Annotated[bool, typer.Option(
        "--all-clouds", help="Also recommend offers on clouds no registered backend launches on (azure).")] = False,
    json_: JsonFlag = False,
) -> None:
    """Rank where to run a job: expected cost, preemptions and finish time from history."""
    doc = sdk.plan(str(job_file), trace=trace, all_clouds=all_clouds)
    if json_:
        print_json(doc)
    else:
        render.print_plan(console, doc)


market_app = typer.Typer(help="Live market data: record an instance type's spot prices into a trace file.",
                         no_args_is_help=True)
app.add_typer(market_app, name="market")


@market_app.command("record")
def record(
    region: Annotated[str, typer.Option("--region", help="AWS region, e.g. us-west-2, or Compute Engine region, "
                                                         "e.g. us-central1.")],
    instance_type: Annotated[str, typer.Option(
        "--instance-type", help="e.g. p3.2xlarge; on gcp a2-highgpu-1g, or an N1 host with its GPUs: "
                                "n1-standard-8+V100.")],
    zones: Annotated[list[str] | None, typer.Option(
        "--zones", help="Zones to record: repeat the flag or separate them by commas (default: every zone).")] = None,
    trace: Annotated[str | None, typer.Option(
        "--trace", help="Trace CSV to append to (created if missing); default INSTANCE-TYPE_REGION.csv.")] = None,
    hours: Annotated[float, typer.Option(
        "--hours", help="History to record into a new file (aws; gcp has none).")] = 24.0,
    gap_s: Annotated[int, typer.Option("--gap-s", help="Tick length in seconds.")] = 300,
    cloud: Annotated[str | None, typer.Option(
        "--cloud", help="The backend whose cloud to read, aws or gcp (default: the one whose region --region "
                        "names).")] = None,
    json_: JsonFlag = False,
) -> None:
    """Append spot price history and the preemptions and capacity errors seen here to a trace file.

    gcp publishes today's prices only (the Cloud Billing Catalog): each call appends one observation.
    """
    if zones is not None:
        zones = [zone.strip() for given in zones for zone in given.split(",")]
    doc = sdk.market_record(region, instance_type, zones=zones, trace=trace, hours=hours, gap_s=gap_s, cloud=cloud)
    if json_:
        print_json(doc)
    else:
        console.print(f"{doc['trace']}: {doc['rows']} rows appended for {', '.join(doc['zones']) or 'no zone'} "
                      f"({doc['outages']} with capacity gone)")
