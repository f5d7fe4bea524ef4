"""AWS verbs: `gc` (leftovers by tag)."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, app, console, print_json


@app.command()
def gc(
    region: Annotated[list[str] | None, typer.Option(
        "--region", help="Region to clean (repeatable); default $AWS_REGION, else us-east-1.")] = None,
    job: Annotated[str | None, typer.Option("--job", help="Only this job's resources.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
    include_active: Annotated[bool, typer.Option(
        "--include-active", help="Also remove resources of jobs still active in this state DB.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Find and remove EC2 instances, spot requests and groups spotfit left behind (by tag)."""
    doc = sdk.gc(region, job=job, dry_run=dry_run, include_active=include_active)
    if json_:
        print_json(doc)
    else:
        render.print_gc(console, doc)
