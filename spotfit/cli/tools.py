"""Tool verbs: `tensorboard JOB` (serve the job's logs on 127.0.0.1), `doctor` and `ui` (the dashboard)."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, LatestJobRef, app, console, print_json


@app.command()
def tensorboard(
    job: LatestJobRef = None,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1.")] = 6006,
    json_: JsonFlag = False,
) -> None:
    """Serve a job's TensorBoard logs on 127.0.0.1 until Ctrl-C (fetching them from a remote store).

    With `--json`, the line printed once the server runs is one JSON document: id, url, logdir.
    """
    def started(job_id: str, url: str, logdir: object) -> None:
        if json_:
            print_json({"id": job_id, "url": url, "logdir": str(logdir)})
        else:
            console.print(f"TensorBoard for {job_id} at {url} ({logdir})")

    raise typer.Exit(sdk.tensorboard(job, port, on_start=started))


@app.command()
def doctor(
    store: Annotated[str | None, typer.Option(
        "--store", help="Object store URL to probe (default: the home's).")] = None,
    registry: Annotated[str | None, typer.Option("--registry", help="Model registry URL to probe.")] = None,
    spec: Annotated[str | None, typer.Option(
        "--spec", help="A job spec: also say which Keras its script runs on, why, and whether it is here.")] = None,
    json_: JsonFlag = False,
) -> None:
    """Check TensorFlow, Keras 3 and 2, CUDA, devices, mixed precision, XLA and store access; print each fix."""
    report = sdk.doctor(store, registry, spec)
    if json_:
        print_json(report)
    else:
        console.print(render.doctor_table(report))
    if not report["ok"]:
        raise typer.Exit(1)


@app.command()
def ui(
    host: Annotated[str, typer.Option(
        "--host", help="Address to bind. Keep 127.0.0.1 and use an SSH tunnel to reach it from elsewhere.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 picks a free one).")] = 8765,
    tls_cert: Annotated[str | None, typer.Option(
        "--tls-cert", help="PEM certificate: serve HTTPS (with --tls-key); the token's cookie is then Secure.")] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key", help="PEM private key of --tls-cert.")] = None,
) -> None:
    """Serve the live web dashboard (jobs, costs, preemptions, plans, sweeps) until Ctrl-C; prints its URL with a token.

    SPOTFIT_UI_TOKEN sets the token; otherwise each start makes a new one. The dashboard only reads
    the state DB where it lives: $SPOTFIT_HOME's, or SPOTFIT_STATE_URL's (PostgreSQL in read-only sessions).
    """
    def started(url: str) -> None:
        console.print(f"spotfit ui: open {url}", highlight=False, soft_wrap=True)

    from spotfit.ui.launch import ui as serve

    serve(host, port, on_start=started, tls_cert=tls_cert, tls_key=tls_key)
