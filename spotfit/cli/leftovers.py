"""`gc`: the leftovers the cloud backends left behind, by tag or label, and the secrets of ended jobs."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, app, console, print_json


@app.command()
def gc(
    region: Annotated[list[str] | None, typer.Option(
        "--region", help="Region to clean (repeatable): an AWS region (aws's default: $AWS_REGION, else "
                         "us-east-1) or a Compute Engine region or zone (gcp's default: every zone).")] = None,
    job: Annotated[str | None, typer.Option("--job", help="Only this job's resources.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
    include_active: Annotated[bool, typer.Option(
        "--include-active", help="Also remove the cloud resources of jobs still active in this state DB (never "
                                 "their secrets).")] = False,
    backend: Annotated[str | None, typer.Option(
        "--backend", "--cloud", help="The cloud backend to clean, aws or gcp (default: every one that can leave "
                                     "resources behind; with --region, those whose regions it names).")] = None,
    json_: JsonFlag = False,
) -> None:
    """Remove what spotfit left behind in the clouds, by tag or label, and the secrets of ended jobs.

    aws: instances, spot requests, security and placement groups tagged by spotfit, in --region; without
    --job, also the data snapshots (data.volume: snapshot) that no active or resumable job uses; the SSM
    secrets (/spotfit/JOB/) of this state DB's aws jobs that ended for good, in each job's region.

    gcp: the VMs and unattached disks labelled by spotfit in $GOOGLE_CLOUD_PROJECT (every zone, or
    --region's); the Secret Manager secrets of this state DB's gcp jobs that ended for good.

    Never the secrets of active or stopped (resumable) jobs.
    """
    doc = sdk.gc(region, job=job, dry_run=dry_run, include_active=include_active, backend=backend)
    if json_:
        print_json(doc)
    else:
        render.print_gc(console, doc)
