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
from rich.text import Text
from typer.core import TyperGroup

from spotfit.errors import SpotfitError
from spotfit.host.home import private_umask

# Pipes and CI logs get wide tables instead of columns cut to 80 characters.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

_debug = {"on": False}
_DEBUG_HINT = "rerun with --debug for the traceback"
_MAX_MESSAGE_CHARS = 500  # a message quoting a huge value stays one readable line


class _Root(TyperGroup):
    """The `spotfit` group: whatever a verb raises ends as one `error:` line and an exit code.

    - `SpotfitError`: its message, its hint on a second line, its exit code (2 for bad input);
    - a bad flag, value or verb (typer's own errors, found while parsing): the message, a hint
      naming `--help`, exit 2;
    - anything else is a bug: one line naming the exception, exit 1.

    With `--debug` (before the verb), `SpotfitError`s and unexpected errors raise with their
    traceback instead. It runs for the console script and for `CliRunner` alike.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _debug["on"] = False
        kwargs["standalone_mode"] = False  # errors come here, not to typer's boxes
        try:
            code = super().main(*args, **kwargs)
        except SpotfitError as err:
            if _debug["on"]:
                raise
            code = _report(err.message, err.hint, err.exit_code)
        except typer.TyperException as err:
            code = _usage_error(err)
        except typer.Abort:
            code = _report("aborted", None, 130)
        except Exception as exc:  # noqa: BLE001  (the last resort: a bug becomes one line, not a traceback)
            if _debug["on"]:
                raise
            detail = " ".join(str(exc).split())[:300]  # cut here, so that the advice after it stays
            code = _report(f"unexpected {type(exc).__name__}: {detail} ({_DEBUG_HINT})", None, 1)
        sys.exit(code if isinstance(code, int) else 0)


def _usage_error(err: typer.TyperException) -> int:
    """A parse error: typer's message, and the `--help` of the verb it came from."""
    if type(err).__name__ == "NoArgsIsHelpError":  # `spotfit` alone: typer has printed the help
        return err.exit_code
    ctx = getattr(err, "ctx", None)
    command = ctx.command_path if ctx is not None else "spotfit"
    return _report(err.format_message(), f"See `{command} --help`.", err.exit_code)


def _report(message: str, hint: str | None, exit_code: int) -> int:
    """Print `error: message` and `hint: hint` on stderr, one line each; returns `exit_code`.

    Whitespace is folded so that each is exactly one line, whatever the message quotes; the
    text is printed as is (no markup, no emoji codes), so a value such as `[/x]` shows verbatim.
    """
    for label, style, text in (("error:", "bold red", message), ("hint:", "dim", hint)):
        if text:
            line = " ".join(str(text).split())
            if len(line) > _MAX_MESSAGE_CHARS:
                line = line[:_MAX_MESSAGE_CHARS - 1] + "…"
            err_console.print(Text.assemble((label, style), " ", line), soft_wrap=True, highlight=False)
    return exit_code


app = typer.Typer(
    name="spotfit",
    help="Train Keras models on cloud spot GPUs at the lowest cost, without losing work.",
    cls=_Root,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Parameters shared by several verbs, defined once. `--json` is the flag of every verb that
# prints a table: `json_: JsonFlag = False`.
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
JobRef = Annotated[str, typer.Argument(help="Job id, id prefix or name.")]
LatestJobRef = Annotated[str | None, typer.Argument(help="Job id, id prefix or name (default: the latest job).")]
SpecPath = Annotated[Path, typer.Argument(help="The job spec YAML.")]


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show the traceback of an error instead of one line (give it before the verb).")] = False,
) -> None:
    _debug["on"] = debug


def print_json(document: Any) -> None:
    """Write one JSON document to stdout (the `--json` contract of every verb)."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()


def main() -> None:
    """Console entry point (`spotfit`, `python -m spotfit`): errors end as one line (see `_Root`).

    What spotfit writes is its owner's alone (umask 077), in this process and the ones it starts.
    """
    private_umask()
    app()
