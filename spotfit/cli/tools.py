"""Tool verbs: `tensorboard JOB` (serve the job's logs on 127.0.0.1) and `doctor`."""

from __future__ import annotations

from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from spotfit.cli.app import app, console, print_json


@app.command()
def tensorboard(
    job: Optional[str] = typer.Argument(None, help="Job id, id prefix or name (default: the latest job)."),
    port: int = typer.Option(6006, "--port", help="Port on 127.0.0.1."),
) -> None:
    """Serve a job's TensorBoard logs on 127.0.0.1 until Ctrl-C (fetching them from a remote store)."""
    from spotfit import sdk
    from spotfit.home import home
    from spotfit import tensorboard_server as tb

    row = sdk.db().find_job(job or "")
    code = tb.serve(row["store_url"], row["id"], port, home() / "cache" / "tensorboard",
                    on_start=lambda url, logdir: console.print(f"TensorBoard for {row['id']} at {url} ({logdir})"))
    raise typer.Exit(code)


@app.command()
def doctor(
    store: Optional[str] = typer.Option(None, "--store", help="Object store URL to probe (default: the home's)."),
    registry: Optional[str] = typer.Option(None, "--registry", help="Model registry URL to probe."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Check TensorFlow, CUDA, devices, mixed precision, XLA and store access; print each fix."""
    from spotfit.runtime import doctor as doc

    report = doc.run(store, registry)
    if json_:
        print_json(report)
    else:
        table = Table(title="spotfit doctor", title_justify="left")
        for col in ("check", "status", "detail", "fix"):
            table.add_column(col)
        colour = {doc.OK: "green", doc.WARN: "yellow", doc.FAIL: "red"}
        for c in report["checks"]:
            table.add_row(escape(c["name"]), f"[{colour[c['status']]}]{c['status']}[/]", escape(c["detail"]),
                          escape(c["fix"]))
        console.print(table)
    if not report["ok"]:
        raise typer.Exit(1)
