"""Job verbs: validate, run, status, logs, cancel, resume, list."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import app, console, print_json
from spotfit.states import JobState

JSON = typer.Option(False, "--json", help="Print one JSON document on stdout.")


@app.command()
def validate(
    spec: Path = typer.Argument(..., help="The job spec YAML."),
    json_: bool = JSON,
) -> None:
    """Check a job spec; exit 2 with one clear line if it is invalid."""
    job = sdk.validate(str(spec))
    if json_:
        print_json({"valid": True, "name": job.name, "spec_hash": job.spec_hash(),
                    "spec": job.model_dump(mode="json")})
        return
    console.print(f"[green]valid[/] {spec}: job {job.name!r}, script {job.script}, "
                  f"{job.resources.count}x{job.resources.accelerator} × {job.resources.workers} worker(s), "
                  f"{'spot' if job.resources.spot else 'on-demand'}")


@app.command()
def run(
    spec: Path = typer.Argument(..., help="The job spec YAML."),
    detach: bool = typer.Option(False, "--detach", "-d", help="Return the job id at once; the job goes on."),
    preempt_at: Optional[str] = typer.Option(
        None, "--preempt-at", metavar="STEP[:NOTICE_S],...",
        help="Inject preemptions at these steps (SIGTERM, SIGKILL after NOTICE_S; 0 = SIGKILL at once).",
    ),
    backend: Optional[str] = typer.Option(None, "--backend", help="Run on this backend instead of the spec's `backend:`."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact cloud requests; send and record nothing."),
    json_: bool = JSON,
) -> None:
    """Run a job: launch, checkpoint, survive preemptions, and print a summary."""
    if dry_run:
        _check_dry_run(spec, backend)
    if dry_run:
        from spotfit.backends.aws.dryrun import dry_run as plan_requests
        from spotfit.cli.aws import print_dry_run

        print_dry_run(plan_requests(str(spec)), json_)
        return
    job_id = sdk.submit(str(spec), preempt_at=preempt_at, backend=backend)
    if detach:
        sdk.start_detached(job_id)
        if json_:
            print_json({"id": job_id, "state": "pending"})
        else:
            console.print(job_id)
        return
    if json_:
        doc = sdk.run_job(job_id)
        print_json(doc)
    else:
        console.print(f"job [bold]{job_id}[/]")
        with render.LiveRun(console, lambda: sdk.status(job_id), lambda after: sdk.events(job_id, after)) as live:
            doc = sdk.run_job(job_id, on_update=live.update)
        render.print_status(console, doc)
    if doc["state"] != JobState.COMPLETED:
        raise typer.Exit(1)


def _check_dry_run(spec: Path, backend: str | None) -> None:
    """`--dry-run` plans for aws only: the one backend that sends cloud requests."""
    from spotfit.errors import UsageError

    chosen = backend or sdk.validate(str(spec)).backend
    if chosen != "aws":
        raise UsageError(f"Invalid --dry-run: received backend {chosen!r}, expected aws (the only backend "
                         "that sends cloud requests).", hint="Add --backend aws, or leave --dry-run out.")


@app.command()
def status(
    job: str = typer.Argument(..., help="Job id, id prefix or name."),
    json_: bool = JSON,
) -> None:
    """Show a job's state, step, attempts and cost."""
    doc = sdk.status(job)
    if json_:
        print_json(doc)
    else:
        render.print_status(console, doc)


@app.command("list")
def list_(json_: bool = JSON, limit: int = typer.Option(50, help="At most this many jobs.")) -> None:
    """List recent jobs."""
    rows = sdk.list_jobs(limit)
    if json_:
        print_json(rows)
    else:
        console.print(render.jobs_table(rows))


@app.command()
def logs(
    job: str = typer.Argument(..., help="Job id, id prefix or name."),
    attempt: Optional[int] = typer.Option(None, "--attempt", help="Attempt number (default: the latest)."),
    json_: bool = JSON,
) -> None:
    """Print an attempt's output and the job's events."""
    doc = sdk.logs(job, attempt)
    if json_:
        print_json(doc)
        return
    render.print_events(console, doc["events"])
    if doc["attempt"]:
        console.rule(f"attempt {doc['attempt']} output")
        console.out(doc["log"], highlight=False)


@app.command()
def cancel(
    job: str = typer.Argument(..., help="Job id, id prefix or name."),
    json_: bool = JSON,
) -> None:
    """Stop a job: its attempt saves a checkpoint and ends; nothing more is billed."""
    doc = sdk.cancel(job)
    if json_:
        print_json(doc)
    else:
        console.print(f"{doc['id']}: {doc['state']} ({doc['message'] or 'cancel requested'})")


@app.command()
def resume(
    job: str = typer.Argument(..., help="Job id, id prefix or name."),
    detach: bool = typer.Option(False, "--detach", "-d", help="Resume in the background."),
    json_: bool = JSON,
) -> None:
    """Give a job whose controller died a new controller; it adopts or relaunches the attempt."""
    doc = sdk.resume(job, detach=detach)
    if json_:
        print_json(doc)
    else:
        render.print_status(console, doc)
