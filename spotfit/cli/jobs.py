"""Job verbs: validate, run, status, logs, cancel, resume, list."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JobRef, JsonFlag, SpecPath, app, console, print_json
from spotfit.state.states import JobState


@app.command()
def validate(spec: SpecPath, json_: JsonFlag = False) -> None:
    """Check a job spec; exit 2 with one clear line if it is invalid."""
    from spotfit.script import keras2

    job = sdk.validate(str(spec))
    choice = None if job.is_notebook else keras2.choose(job.training.keras, job.script_path)
    keras_2 = None if choice is None else keras2.warning_for(choice, job.script_path.name)
    if keras_2 is not None:  # on stderr: --json keeps stdout one document
        typer.echo(f"warning: {keras_2}", err=True)
    if json_:
        keras = None if choice is None else {"version": choice.version, "why": choice.why}
        print_json({"valid": True, "name": job.name, "spec_hash": job.spec_hash(), "keras": keras,
                    "keras2_code": keras_2, "spec": job.model_dump(mode="json")})
        return
    what = "a notebook (JupyterLab)" if job.is_notebook else f"script {job.script}"
    console.print(f"[green]valid[/] {spec}: job {job.name!r}, {what}, "
                  f"{job.resources.count}x{job.resources.accelerator} × {job.resources.workers} worker(s), "
                  f"{'spot' if job.resources.spot else 'on-demand'}", soft_wrap=True)
    if choice is not None:
        console.print(f"keras: {keras2.choice_line(choice, job.script_path.name)}", soft_wrap=True, markup=False)


@app.command()
def run(
    spec: SpecPath,
    detach: Annotated[bool, typer.Option(
        "--detach", "-d", help="Return the job id at once; the job goes on (on a shared state "
                               "$SPOTFIT_STATE_URL, a `spotfit controller` drives it).")] = False,
    preempt_at: Annotated[str | None, typer.Option(
        "--preempt-at", metavar="STEP[:NOTICE_S],...",
        help="Inject preemptions at these steps (SIGTERM, SIGKILL after NOTICE_S; 0 = SIGKILL at once).")] = None,
    backend: Annotated[str | None, typer.Option(
        "--backend", help="Run on this backend instead of the spec's `backend:`.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the exact cloud requests; send and record nothing.")] = False,
    allow_duplicate: Annotated[bool, typer.Option(
        "--allow-duplicate", help="Run even if a live job has the spec's name (refused otherwise).")] = False,
    json_: JsonFlag = False,
) -> None:
    """Run a job: launch, checkpoint, survive preemptions, and print a summary.

    Ctrl-C stops the job with a checkpoint (the attempt saves and stops; no attempt is left
    running) and exits 130; SIGTERM and SIGHUP do the same (exit 143, 129). `spotfit resume JOB`
    continues it from that step. Use --detach to leave the job running in the background.
    """
    if dry_run:
        doc = sdk.dry_run(str(spec), backend)
        if json_:
            print_json(doc)
        else:
            render.print_dry_run(console, doc)
        return
    job_id = sdk.submit(str(spec), preempt_at=preempt_at, backend=backend, allow_duplicate=allow_duplicate)
    for event in sdk.events(job_id):  # said at once, on stderr: --json keeps stdout one document
        if event["kind"] in ("nothing_checkpointed", "keras2_code", "backend_note"):
            typer.echo(f"warning: {event['message']}", err=True)
        elif event["kind"] == "keras" and event["data"].get("version") == "2":  # Keras 3 is the quiet default
            typer.echo(f"keras: {event['message']}", err=True)
    if detach:
        if sdk.start_detached(job_id) is None and not sdk.live_controllers():  # a shared state: no controller here
            typer.echo(f"warning: no `spotfit controller` has been seen on this state in the last minute: "
                       f"job {job_id} waits until one runs (docs/team-state.md)", err=True)
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
    raise typer.Exit(128 + int(doc.get("interrupt_signal", 2)) if doc.get("interrupted") else run_exit_code(doc))


EXIT_PAUSED = 3  # `spotfit run`: the job is paused by a rule; `spotfit resume JOB` continues it
EXIT_EXPORT_FAILED = 4  # `spotfit run`: the job completed (trained, checkpointed) but its export was not published
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + the signal: SIGTERM 143, SIGHUP 129): the attempt saved and stopped


def run_exit_code(doc: dict) -> int:
    """`spotfit run`'s exit code for the job's final status document (README, "Exit codes").

    0 completed; 4 completed but the export failed; 3 paused by a rule (resumable); 1 failed,
    stopped or cancelled. A configuration error never gets here: it is raised, and exits 2 like
    every bad input.
    """
    if doc["state"] == JobState.COMPLETED:
        return EXIT_EXPORT_FAILED if (doc.get("export") or {}).get("error") else 0
    return EXIT_PAUSED if doc["state"] == JobState.PAUSED else 1


@app.command()
def status(job: JobRef, json_: JsonFlag = False) -> None:
    """Show a job's state, step, attempts and cost."""
    doc = sdk.status(job)
    if json_:
        print_json(doc)
    else:
        render.print_status(console, doc)


@app.command()
def submit(
    specs: Annotated[list[str], typer.Argument(help="Job spec YAML files, or folders of them.")],
    parallel: Annotated[int | None, typer.Option(
        "--parallel", help="At most this many jobs at once, on a shared state's controllers too "
                           "(default: one per GPU, 1 on a CPU machine).")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Run the queue here until every job has ended.")] = False,
    allow_duplicate: Annotated[bool, typer.Option(
        "--allow-duplicate", help="Queue jobs that share a name, or have a live job's (refused otherwise).")] = False,
    json_: JsonFlag = False,
) -> None:
    """Queue many jobs as one batch: each waits `queued` until the batch's queue releases it to a controller.

    `spotfit list` groups them, `spotfit cancel JOB` drops a queued one, `spotfit batch resume` replaces a dead queue.
    """
    from spotfit.sdk import batch

    doc = batch.submit(specs, parallel, allow_duplicate=allow_duplicate)
    if wait:
        doc["jobs"] = [{"id": j["id"], "state": j["state"]} for j in batch.run_queue(doc["id"])]
    else:
        batch.start_queue(doc["id"])
    if json_:
        print_json(doc)
        return
    console.print(f"batch [bold]{doc['id']}[/]: {len(doc['jobs'])} job(s), {doc['parallel']} at once")
    for job in doc["jobs"]:
        console.print(f"  {job['id']} {job['state']}" if isinstance(job, dict) else f"  {job}")


@app.command("list")
def list_(
    json_: JsonFlag = False,
    limit: Annotated[int, typer.Option(help="At most this many jobs.")] = 50,
) -> None:
    """List recent jobs, grouped by the batch or sweep they belong to."""
    rows = sdk.list_jobs(limit)
    if json_:
        print_json(rows)
    else:
        console.print(render.jobs_table(rows))


@app.command()
def logs(
    job: JobRef,
    attempt: Annotated[int | None, typer.Option("--attempt", help="Attempt number (default: the latest).")] = None,
    json_: JsonFlag = False,
) -> None:
    """Print an attempt's output and the job's events."""
    doc = sdk.logs(job, attempt)
    if json_:
        print_json(doc)
        return
    render.print_events(console, doc["events"])
    if doc["attempt"]:
        if doc["boot_log_tail"]:
            console.rule(f"attempt {doc['attempt']} boot log (last lines)")
            console.out(doc["boot_log_tail"], highlight=False)
        console.rule(f"attempt {doc['attempt']} output")
        console.out(doc["log"], highlight=False)


@app.command()
def cancel(
    job: Annotated[str, typer.Argument(help="Job or sweep: id, id prefix or name.")],
    json_: JsonFlag = False,
) -> None:
    """Stop a job, or every running trial of a sweep: each saves a checkpoint and ends."""
    from spotfit.core import arguments
    from spotfit.sweep import api as sweeps

    if sweeps.is_sweep(arguments.job_ref(job)):
        doc = sweeps.cancel(job)
        if json_:
            print_json(doc)
        else:
            console.print(f"{doc['id']}: {doc['state']}")
        return
    doc = sdk.cancel(job)
    if json_:
        print_json(doc)
    else:
        console.print(f"{doc['id']}: {doc['state']} ({doc['message'] or 'cancel requested'})")


@app.command()
def resume(
    job: JobRef,
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Resume in the background.")] = False,
    accelerator: Annotated[str | None, typer.Option(
        "--accelerator", help="Move: go on with this accelerator (A100, H100, L4, CPU, ...).")] = None,
    count: Annotated[int | None, typer.Option(
        "--count", help="Move: go on with this many accelerators per machine (replicas).")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", help="Move: go on with this many machines.")] = None,
    zone: Annotated[str | None, typer.Option("--zone", help="Move: go on in this zone only.")] = None,
    backend: Annotated[str | None, typer.Option("--backend", help="Move: go on on this backend.")] = None,
    spec: Annotated[str | None, typer.Option(
        "--spec", metavar="NEW.yaml", help="Move: go on under this spec (same name, checkpoint store, "
                                           "secrets); the flags above apply on top of it.")] = None,
    json_: JsonFlag = False,
) -> None:
    """Give a job whose controller died a new controller; it adopts or relaunches the attempt.

    A batch's queued job is refused: its batch's queue starts it (`spotfit batch resume BATCH`).

    With --accelerator, --count, --workers, --zone, --backend or --spec the job moves: it goes on from
    its last checkpoint on the new resources, with the same id, store and step. What changes: the
    machine, the number of replicas, and so the examples each replica gets per step. What does not:
    the global batch (the script's batch_size), the steps, the data order, the weights and optimizer
    state. A job with a live attempt cannot move: stop it first (Ctrl-C on `spotfit resume JOB`).
    """
    change = sdk.Move(accelerator=accelerator, count=count, workers=workers, zone=zone, backend=backend,
                      spec_path=spec)
    doc = sdk.resume(job, detach=detach, change=change)
    if json_:
        print_json(doc)
    else:
        render.print_status(console, doc)
