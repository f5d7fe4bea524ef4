"""Interactive verbs: notebook, ssh, port-forward."""

from __future__ import annotations

import subprocess
from typing import Annotated

import typer

from spotfit import interactive, sdk
from spotfit.cli.app import JobRef, JsonFlag, app, console, print_json
from spotfit.core.registry import registered_backends
from spotfit.errors import UsageError
from spotfit.state.states import JobState


@app.command()
def notebook(
    spec: Annotated[str | None, typer.Argument(
        metavar="[SPEC | open JOB]", help="A `kind: notebook` spec (default: a notebook in this folder); "
                                          "or `open JOB` to print a running notebook's URL.")] = None,
    job: Annotated[str | None, typer.Argument(metavar="", hidden=True, show_default=False)] = None,
    backend: Annotated[str | None, typer.Option(
        "--backend", help=f"{', '.join(registered_backends())} (default: the spec's `backend:`).")] = None,
    detach: Annotated[bool, typer.Option(
        "--detach", "-d", help="Return once the URL is printed; the notebook goes on.")] = False,
    wait_s: Annotated[float, typer.Option("--wait-s", help="How long to wait for the server to answer.")] = 300.0,
    json_: JsonFlag = False,
) -> None:
    """Start JupyterLab as a spot job (token in a 0600 file, 127.0.0.1 only), or `open JOB` for its URL.

    The working folder is saved to the job's store at an interval and on a preemption; an idle
    notebook saves and stops itself (rule `idle_notebook`). Without --detach this command waits
    until the notebook ends; Ctrl-C cancels it (its files are saved first).
    """
    if spec == "open":
        if job is None:
            raise UsageError("Missing JOB: `spotfit notebook open JOB`.", hint="Pass the notebook's job id.")
        _show(interactive.notebook_where(job, wait_s=wait_s), json_)
        return
    if job is not None:
        raise UsageError(f"Unexpected argument {job!r}: expected `spotfit notebook [SPEC]` or "
                         "`spotfit notebook open JOB`.", hint="See `spotfit notebook --help`.")
    job_id = interactive.notebook(spec, backend=backend)
    sdk.start_detached(job_id)
    _show(interactive.notebook_where(job_id, wait_s=wait_s), json_)
    if detach:
        return
    try:
        doc = sdk.wait(job_id, timeout_s=float("inf"))
    except KeyboardInterrupt:
        doc = sdk.cancel(job_id)
        doc = sdk.wait(job_id, timeout_s=120.0)
    if not json_:
        console.print(f"{doc['id']}: {doc['state']} ({doc['message'] or ''})")
    raise typer.Exit(0 if doc["state"] in (JobState.CANCELLED, JobState.STOPPED, JobState.COMPLETED) else 1)


def _show(where: dict, json_: bool) -> None:
    if json_:  # the token stays in its file: `url` has none
        print_json({k: where[k] for k in ("id", "url", "token_file", "attempt", "backend", "forward")})
        return
    from pathlib import Path

    token = Path(where["token_file"]).read_text().strip()
    console.print(f"notebook [bold]{where['id']}[/] (attempt {where['attempt']}, {where['backend']})")
    if where["forward"]:
        console.print("forward its port first:  " + subprocess.list2cmdline(where["forward"]), soft_wrap=True)
    console.print(f"{where['url']}?token={token}", soft_wrap=True, highlight=False)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def ssh(
    ctx: typer.Context,
    job: JobRef,
    print_only: Annotated[bool, typer.Option("--print", help="Print the command instead of running it.")] = False,
    json_: JsonFlag = False,
) -> None:
    """A shell (or `-- CMD`) where the job's attempt runs: its folder (local), SSM/SSH (aws), exec (kubernetes)."""
    doc = interactive.shell(job, list(ctx.args))
    if json_ or print_only:
        if json_:
            print_json(doc)
        else:
            console.print(subprocess.list2cmdline(doc["argv"]), soft_wrap=True, highlight=False)
        return
    raise typer.Exit(subprocess.call(doc["argv"], cwd=doc["cwd"]))


@app.command("port-forward")
def port_forward(
    job: JobRef,
    ports: Annotated[str, typer.Argument(metavar="LOCAL:REMOTE", help="Ports, e.g. 6006 or 9000:8888.")],
    print_only: Annotated[bool, typer.Option("--print", help="Print the command instead of running it.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Carry 127.0.0.1:LOCAL here to REMOTE at the job's attempt (TensorBoard: `spotfit port-forward JOB 6006`)."""
    doc = interactive.port_forward(job, ports)
    if json_ or print_only:
        if json_:
            print_json(doc)
        else:
            console.print(subprocess.list2cmdline(doc["argv"] or ["(local: relayed on 127.0.0.1)"]),
                          soft_wrap=True, highlight=False)
        return
    if doc["argv"] is not None:
        raise typer.Exit(subprocess.call(doc["argv"]))
    if doc["local"] == doc["remote"]:  # the attempt listens here already
        console.print(f"job {doc['id']} runs here: 127.0.0.1:{doc['remote']} is reachable as it is")
        return
    from spotfit.interactive.port_relay import Relay

    relay = Relay(doc["local"], doc["remote"])
    console.print(f"127.0.0.1:{relay.local_port} -> 127.0.0.1:{doc['remote']} (Ctrl-C to stop)")
    try:
        relay.serve_forever()
    except KeyboardInterrupt:
        relay.close()
