"""The `cost` verb: the job's ledger of spend, savings against on-demand, and waste."""

from __future__ import annotations

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, LatestJobRef, app, console, print_json


@app.command()
def cost(job: LatestJobRef = None, json_: JsonFlag = False) -> None:
    """Show what a job cost per attempt, what all-on-demand would have cost, and the waste."""
    doc = sdk.cost(job)
    if json_:
        print_json(doc)
    else:
        render.print_cost(console, doc)
