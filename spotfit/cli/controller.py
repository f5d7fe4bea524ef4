"""`spotfit controller`: the long-running controller that drives every job of a shared state."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli.app import app


@app.command()
def controller(
    scan_s: Annotated[float, typer.Option("--scan-s", help="Seconds between looks for jobs to drive.")] = 2.0,
    poll_s: Annotated[float, typer.Option("--poll-s", help="Seconds between passes of each job's loop.")] = 1.0,
    max_jobs: Annotated[int, typer.Option("--max-jobs", help="Most jobs this process drives at once.")] = 2000,
    workers: Annotated[int, typer.Option(
        "--workers", help="Threads that drive the jobs, one state connection each (1 to 9).")] = 4,
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", help="Serve the state's Prometheus metrics on this port (/metrics); default: none.")] = None,
    metrics_host: Annotated[str, typer.Option(
        "--metrics-host", help="The address the metrics are served on (0.0.0.0 in a pod).")] = "127.0.0.1",
) -> None:
    """Run until stopped, driving every job of the state whose lease this process can take.

    State: $SPOTFIT_STATE_URL (postgresql://... or sqlite:////PATH), else $SPOTFIT_HOME/state.db.

    Each job is driven by exactly one controller: a lease, renewed every pass, taken over when it expires.
    The jobs share a few worker threads (--workers), each with one connection to the state.

    SPOTFIT_LEASE_TTL_S: the lease's length (default 15 s). SPOTFIT_CONTROLLER_HOST: this host's name.

    See docs/team-state.md; the metrics: docs/costs.md.
    """
    sdk.serve_controller(scan_s=scan_s, poll_s=poll_s, max_jobs=max_jobs, workers=workers,
                         log=lambda line: typer.echo(line), metrics_port=metrics_port, metrics_host=metrics_host)
