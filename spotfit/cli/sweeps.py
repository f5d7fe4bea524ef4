"""Sweep verbs: `spotfit sweep SWEEP.yaml`, `sweep status`, `sweep compare`, `sweep resume`; `batch resume`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from typer.core import TyperGroup

from spotfit.cli.app import JsonFlag, app, console, print_json

SweepRef = Annotated[str, typer.Argument(help="Sweep id, id prefix or name.")]


class _SweepGroup(TyperGroup):
    """`spotfit sweep FILE.yaml` runs a sweep: an argument that is not a subcommand is the file."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        if first is not None and first not in self.commands:
            args = ["start", *args]
        return super().parse_args(ctx, args)


sweep_app = typer.Typer(cls=_SweepGroup, no_args_is_help=True, help=(
    "Hyperparameter sweeps (docs/sweeps.md). `spotfit sweep SWEEP.yaml [--detach] [--json] "
    "[--preempt-at STEP[:NOTICE_S] --preempt-trial N]` runs one; the commands below inspect and resume it."))
app.add_typer(sweep_app, name="sweep")


@sweep_app.command("start", hidden=True)
def start(
    sweep_file: Annotated[Path, typer.Argument(help="The sweep YAML.")],
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Return the sweep id at once.")] = False,
    preempt_at: Annotated[str | None, typer.Option(
        "--preempt-at", metavar="STEP[:NOTICE_S],...", help="Inject preemptions into one trial's job.")] = None,
    preempt_trial: Annotated[int, typer.Option(
        "--preempt-trial", help="The trial (number) that --preempt-at preempts.")] = 0,
    json_: JsonFlag = False,
) -> None:
    """Run a sweep: trials as jobs, pruned and promoted, then the leaderboard."""
    from spotfit.sweep import api

    sweep_id = api.start(str(sweep_file), preempt_at=preempt_at, preempt_trial=preempt_trial)
    if detach:
        api.start_detached(sweep_id)
        if json_:
            print_json({"id": sweep_id, "state": "running"})
        else:
            console.print(sweep_id)
        return
    typer.echo(f"sweep {sweep_id}", err=True)  # at once, on stderr: --json keeps stdout one document
    doc = api.run(sweep_id)
    _show(doc, json_)
    raise typer.Exit(0 if doc["state"] == "completed" else 1)


@sweep_app.command("status")
def status(sweep: SweepRef, json_: JsonFlag = False) -> None:
    """The leaderboard: one row per trial (params, objective, state, steps, cost)."""
    from spotfit import sdk
    from spotfit.sweep import api, report
    from spotfit.sweep.runner import db

    if json_:
        print_json(api.status(sweep))
    else:
        _table(report.status(db(), sdk.db(), db().get_sweep(sweep), detail=True))


@sweep_app.command("compare")
def compare(
    sweep: SweepRef,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="The HTML file (default: SWEEP-compare.html).")] = None,
    json_: JsonFlag = False,
) -> None:
    """Write the trials' table and Optuna's plots (history, importances) to one HTML file."""
    from spotfit.sweep import api

    doc = api.compare(sweep, None if out is None else str(out))
    if json_:
        print_json(doc)
    else:
        console.print(f"wrote {doc['path']}")


@sweep_app.command("resume")
def resume(
    sweep: SweepRef,
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Resume in the background.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Give a sweep whose controller died a new one: it finishes the sweep, no trial run twice."""
    from spotfit.sweep import api

    _show(api.resume(sweep, detach=detach), json_)


batch_app = typer.Typer(no_args_is_help=True, help=(
    "Batches of jobs queued by `spotfit submit` (docs/sweeps.md#batches): resume a batch whose queue died."))
app.add_typer(batch_app, name="batch")


@batch_app.command("resume")
def batch_resume(
    batch: Annotated[str, typer.Argument(help="Batch id (batch-YYYYmmdd-HHMMSS-xxxx, as `spotfit list` groups).")],
    detach: Annotated[bool, typer.Option("--detach", "-d", help="Resume the queue in the background.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Give a batch whose queue died a new one: it starts the jobs still queued, no job run twice."""
    from spotfit.sdk import batch as batches

    doc = batches.resume(batch, detach=detach)
    if json_:
        print_json(doc)
        return
    console.print(f"batch [bold]{doc['id']}[/]: {len(doc['jobs'])} job(s), {doc['parallel']} at once")
    for job in doc["jobs"]:
        console.print(f"  {job['id']} {job['state']}")


def _show(doc: dict, json_: bool) -> None:
    if json_:
        print_json(doc)
        return
    from spotfit import sdk
    from spotfit.sweep import report
    from spotfit.sweep.runner import db

    _table(report.status(db(), sdk.db(), db().get_sweep(doc["id"]), detail=True))


def _table(doc: dict[str, Any]) -> None:
    table = Table(title=f"{doc['id']}: {doc['state']}" + (f" ({doc['message']})" if doc["message"] else ""))
    for col in ("trial", "params", doc["objective"]["metric"], "state", "steps", "cost $", "job"):
        table.add_column(col)
    best = doc["best"]["number"] if doc["best"] else None
    for r in doc["trials"]:
        params = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r["params"].items())
        value = "" if r["value"] is None else f"{r['value']:.4g}" + (" *" if r["number"] == best else "")
        table.add_row(str(r["number"]), params, value, r["state"], f"{r['steps']}/{r['total_steps'] or '?'}",
                      f"{r['cost_usd']:.4f}", r["job_id"] or "")
    console.print(table)
    totals = doc["totals"]
    console.print(f"spent ${totals['spent_usd']:.4f}; pruning saved ~${totals['saved_by_pruning_usd']:.4f}")
