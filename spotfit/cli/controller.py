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
    max_jobs: Annotated[int, typer.Option("--max-jobs", help="Most jobs this process drives at once.")] = 32,
) -> None:
    """Run until stopped, driving every job of the state whose lease this process can take.

    The state is $SPOTFIT_STATE_URL (a team's PostgreSQL, or sqlite:////PATH on a volume), else
    $SPOTFIT_HOME/state.db. Several controllers may share a state: each job is driven by exactly
    one (a lease, renewed every pass, taken over when it expires). See docs/team-state.md.
    """
    sdk.serve_controller(scan_s=scan_s, poll_s=poll_s, max_jobs=max_jobs,
                         log=lambda line: typer.echo(line))
