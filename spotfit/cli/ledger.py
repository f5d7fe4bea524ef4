"""The `cost` verb: a job's ledger of spend, savings against on-demand and waste, or the sums over all jobs."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, LatestJobRef, app, console, print_json
from spotfit.errors import UsageError


@app.command()
def cost(
    job: LatestJobRef = None,
    all_: Annotated[bool, typer.Option("--all", help="Sum over every job created in the window, by --by.")] = False,
    since: Annotated[str, typer.Option(help="With --all: the window, e.g. 12h, 30d, 2w.")] = "30d",
    by: Annotated[str, typer.Option(help="With --all: group by backend, zone or a label key (project, owner, ...).")]
    = "project",
    json_: JsonFlag = False,
) -> None:
    """Show what a job cost per attempt, what all-on-demand would have cost, and the waste.

    With --all: spend, savings, waste and regret summed over the jobs created in the last --since, by --by.
    """
    if all_ and job is not None:
        raise UsageError(f"Give a job or --all, not both: received {job!r} and --all.",
                         hint="`spotfit cost JOB` for one job, `spotfit cost --all` for every job.")
    if not all_ and (since != "30d" or by != "project"):
        raise UsageError("--since and --by sum over many jobs: they need --all.",
                         hint=f"Pass `spotfit cost --all --since {since} --by {by}`.")
    doc = sdk.cost_all(since, by) if all_ else sdk.cost(job)
    if json_:
        print_json(doc)
    elif all_:
        render.print_spend(console, doc)
    else:
        render.print_cost(console, doc)
