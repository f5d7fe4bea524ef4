"""The CLI's click command built once per test process, for typer's `CliRunner`.

typer's `CliRunner.invoke(app, ...)` builds the app's click command anew on every call, reading
every verb's signature: 0.05-0.07 s of CPU for spotfit's app, most of the time of the in-process
CLI tests (the hypothesis-driven refusals invoke it hundreds of times). The command is a
definition, the same for every call (what a verb does is looked up when it runs), so
`built_once` keeps the first one; tests/conftest.py installs it for every test.

>>> from spotfit.cli import app
>>> built_once(app) is built_once(app)
True
"""

from __future__ import annotations

from typing import Any

import typer.main
import typer.testing

_COMMANDS: dict[int, Any] = {}


def built_once(typer_app: typer.Typer) -> Any:
    """`typer.main.get_command(typer_app)`, built on the first call and kept."""
    if id(typer_app) not in _COMMANDS:
        _COMMANDS[id(typer_app)] = (typer_app, typer.main.get_command(typer_app))  # the app kept alive: ids stay unique
    return _COMMANDS[id(typer_app)][1]


def install(monkeypatch) -> None:
    """Make typer's `CliRunner.invoke` use `built_once`; one clear failure when typer changed."""
    # Guard what is patched: typer.testing's invoke calls its private `_get_command` (typer 0.x).
    assert getattr(typer.testing, "_get_command", None) in (typer.main.get_command, built_once), (
        "typer.testing no longer builds its command with typer.main.get_command: update tests/support/cli_once.py")
    monkeypatch.setattr(typer.testing, "_get_command", built_once)
