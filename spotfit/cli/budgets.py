"""The `budget` verbs: budgets over many jobs in `$SPOTFIT_HOME/config.yaml` or the shared state DB (list, set, rm)."""

from __future__ import annotations

from typing import Annotated

import typer

from spotfit import sdk
from spotfit.cli import render
from spotfit.cli.app import JsonFlag, app, console, print_json

budget_app = typer.Typer(help="Budgets over many jobs (by label, per day, week or month): list, set, rm.",
                         no_args_is_help=True)
app.add_typer(budget_app, name="budget")


def _show(doc: dict, json_: bool) -> None:
    if json_:
        print_json(doc)
    else:
        render.print_budgets(console, doc)


@budget_app.command("list")
def budget_list(json_: JsonFlag = False) -> None:
    """Show each budget and what the jobs it covers spent this period."""
    _show(sdk.budget_list(), json_)


@budget_app.command("set")
def budget_set(
    name: Annotated[str, typer.Argument(help="The budget's name (set replaces a budget of that name).")],
    usd: Annotated[float, typer.Option("--usd", help="USD per period.")],
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="KEY=VALUE: the jobs it covers have this label (repeat; none = every job).")] = None,
    period: Annotated[str, typer.Option(help="day, week or month (UTC calendar).")] = "month",
    at_80_percent: Annotated[str, typer.Option("--at-80-percent", help="none, notify or pause.")] = "notify",
    at_100_percent: Annotated[str, typer.Option("--at-100-percent", help="none, notify or pause.")] = "pause",
    shared: Annotated[bool, typer.Option("--shared", help="Keep it in the shared state DB (SPOTFIT_STATE_URL), "
                                                          "where every controller of the team reads it.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Add or replace a budget over the jobs with the given labels."""
    _show(sdk.budget_set(name, usd, label, period, at_80_percent, at_100_percent, shared), json_)


@budget_app.command("rm")
def budget_rm(name: Annotated[str, typer.Argument(help="The budget's name.")],
              shared: Annotated[bool, typer.Option("--shared", help="Remove it from the shared state DB.")] = False,
              json_: JsonFlag = False) -> None:
    """Remove a budget."""
    _show(sdk.budget_rm(name, shared), json_)
