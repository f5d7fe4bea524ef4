"""The typer application, shared options and the one place that turns errors into exit codes.

Command modules (`jobs.py`, `market.py`, ...) decorate functions with `@app.command()`; each
command parses its flags, calls one SDK function (`spotfit.sdk`) and renders the result
(`render.py`). `spotfit/cli/__init__.py` imports them, so importing `spotfit.cli` registers
every verb.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from spotfit.errors import SpotfitError

app = typer.Typer(
    name="spotfit",
    help="Train Keras models on cloud spot GPUs at the lowest cost, without losing work.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Pipes and CI logs get wide tables instead of columns cut to 80 characters.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

_debug = {"on": False}

# Parameters shared by several verbs, defined once. `--json` is the flag of every verb that
# prints a table: `json_: JsonFlag = False`.
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
JobRef = Annotated[str, typer.Argument(help="Job id, id prefix or name.")]
LatestJobRef = Annotated[str | None, typer.Argument(help="Job id, id prefix or name (default: the latest job).")]
SpecPath = Annotated[Path, typer.Argument(help="The job spec YAML.")]


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    _debug["on"] = debug


def print_json(document: Any) -> None:
    """Write one JSON document to stdout (the `--json` contract of every verb)."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()


def fail(err: SpotfitError) -> None:
    """Print `error: message` (and the hint) on stderr and exit with the error's code."""
    err_console.print(f"[bold red]error:[/] {err.message}", markup=True, highlight=False, soft_wrap=True)
    if err.hint:
        err_console.print(f"[dim]hint:[/] {err.hint}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(err.exit_code)


def main() -> None:
    """Console entry point: run the app, map SpotfitError to one line and an exit code."""
    try:
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:  # a command's typer.Exit(code) comes back as a value
            sys.exit(code)
    except SpotfitError as err:
        if _debug["on"]:
            raise
        try:
            fail(err)
        except typer.Exit as exit_:
            sys.exit(exit_.exit_code)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(2)
        raise
