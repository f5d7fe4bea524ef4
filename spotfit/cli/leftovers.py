"""`gc`: the leftovers a cloud backend left behind, by tag, and the secrets of ended jobs (aws today)."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, app, console, print_json


@app.command()
def gc(
    region: Annotated[list[str] | None, typer.Option(
        "--region", help="Region to clean (repeatable); aws's default: $AWS_REGION, else us-east-1.")] = None,
    job: Annotated[str | None, typer.Option("--job", help="Only this job's resources.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
    include_active: Annotated[bool, typer.Option(
        "--include-active", help="Also remove EC2 resources of jobs still active in this state DB (never their "
                               "secrets).")] = False,
    backend: Annotated[str | None, typer.Option(
        "--backend", help="The cloud backend to clean (default: the one that leaves resources behind, aws).")] = None,
    json_: JsonFlag = False,
) -> None:
    """Remove what spotfit left behind on AWS: EC2 resources by tag, and the SSM secrets of ended jobs.

    EC2: instances, spot requests, security and placement groups tagged by spotfit, in --region.

    SSM: the secrets (/spotfit/JOB/) of this state DB's aws jobs that ended for good, in each job's region.

    Never the secrets of active or stopped (resumable) jobs.
    """
    doc = sdk.gc(region, job=job, dry_run=dry_run, include_active=include_active, backend=backend)
    if json_:
        print_json(doc)
    else:
        render.print_gc(console, doc)
