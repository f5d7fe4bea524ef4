"""AWS verbs: `gc` (leftovers by tag), and the rendering of `run --backend aws --dry-run`."""

from __future__ import annotations

import json
import os
from typing import Optional

import typer

from spotfit.cli.app import app, console, print_json


@app.command()
def gc(
    region: Optional[list[str]] = typer.Option(
        None, "--region", help="Region to clean (repeatable); default $AWS_REGION, else us-east-1."),
    job: Optional[str] = typer.Option(None, "--job", help="Only this job's resources."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be removed; remove nothing."),
    include_active: bool = typer.Option(
        False, "--include-active", help="Also remove resources of jobs still active in this state DB."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Find and remove EC2 instances, spot requests and groups spotfit left behind (by tag)."""
    from spotfit import sdk
    from spotfit.backends.aws.gc import collect
    from spotfit.states import JobState

    regions = region or [os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"]
    keep = set() if include_active else {
        j["id"] for j in sdk.db().list_jobs(limit=1_000_000) if not JobState(j["state"]).is_terminal()}
    doc = collect(regions, keep=keep, job=job, dry_run=dry_run)
    if json_:
        print_json(doc)
        return
    verb = "would remove" if dry_run else "removed"
    for entry in doc["regions"]:
        found = entry["found"]
        console.print(f"{entry['region']}: {verb} {entry['count']} resource(s)", highlight=False)
        for kind in ("instances", "spot_requests", "placement_groups", "security_groups"):
            for rid, owner in found[kind].items():
                console.print(f"  {kind[:-1].replace('_', ' ')} {rid}  (job {owner})", highlight=False)
        for rid in entry.get("still_in_use", []):
            console.print(f"  still in use, left for the next gc: {rid}", highlight=False)
    if keep:
        console.print(f"kept the resources of {len(keep)} active job(s); --include-active removes them too",
                      highlight=False)


def print_dry_run(doc: dict, json_: bool) -> None:
    """Render the calls of `spotfit run --backend aws --dry-run` (nothing was sent)."""
    if json_:
        print_json(doc)
        return
    console.print(f"dry run: job {doc['job_id']} attempt 1 in {doc['zone'] or 'any zone'} — nothing sent",
                  highlight=False)
    for call in doc["calls"]:
        params = dict(call["params"])
        user_data = params.pop("UserData", None)
        console.rule(call["operation"])
        console.out(json.dumps(params, indent=2), highlight=False)
        if user_data is not None:
            console.rule("UserData (cloud-init, sent base64-encoded)")
            console.out(user_data, highlight=False)
    for warning in doc["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
