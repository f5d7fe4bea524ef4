"""Run one shell example of the docs the way a new user would, and check what it printed.

Each example runs in a fresh folder of its own (a copy of `examples/`, the files its document
declares with `<!-- doc-test: file NAME -->`) with a fresh `SPOTFIT_HOME`, and with `spotfit`,
`.venv/bin/spotfit` and `python` running this checkout's code under the test's interpreter,
whose folder (`weed`, `tensorboard`) is on PATH as in an activated virtualenv. No `AWS_*` or
`SPOTFIT_*` variable of the surrounding run reaches it.

- A `bash`/`sh`/`shell` block runs as one script under `set -euo pipefail`: every command must
  succeed; what it prints is not compared.
- A `console` block is a session: `$ COMMAND` lines (a trailing `\\` continues a command), each
  followed by the output the doc shows. Shown output is compared with what the command printed
  (stdout and stderr together), whitespace folded, so lines wrapped in the doc still match;
  `...` in the doc stands for any text. A command shown without output must exit 0; one whose
  output is shown may fail (the doc shows its `error:` line, or `echo $?` shows its code).

>>> commands = parse_console("$ echo a \\\\\\n  b\\na b\\n$ true\\n")
>>> [(c.command, c.expected) for c in commands]
[('echo a \\\\\\n  b', 'a b'), ('true', None)]
>>> matches("error: Unknown ... `x`", "error:  Unknown field\\n `x`")
True
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.docs.markdown_blocks import Block

REPO = Path(__file__).resolve().parents[2]
_MARK = "@@spotfit-doc-test"
# Variables of the surrounding test run that would point a doc example somewhere else.
_DROP = ("AWS_", "SPOTFIT_", "TF_CONFIG", "KUBECONFIG")
HOME = "spotfit-home"  # the example's SPOTFIT_HOME, inside its folder


@dataclass
class Command:
    command: str
    expected: str | None  # None: the doc shows no output


def parse_console(text: str) -> list[Command]:
    """The `$ ` commands of a console block, each with the output shown below it."""
    commands: list[Command] = []
    output: list[str] = []
    continuing = False
    for line in text.splitlines():
        if continuing:
            commands[-1].command += "\n" + line
            continuing = line.endswith("\\")
        elif line.startswith("$ "):
            if commands:
                commands[-1].expected = "\n".join(output).strip() or None
            commands.append(Command(line[2:], None))
            output = []
            continuing = line.endswith("\\")
        else:
            output.append(line)
    if commands:
        commands[-1].expected = "\n".join(output).strip() or None
    return commands


def matches(expected: str, actual: str) -> bool:
    """Whitespace-folded comparison; `...` in `expected` matches any text."""
    parts = [re.escape(part) for part in " ".join(expected.split()).split("...")]
    return re.fullmatch(r".*?".join(parts), " ".join(actual.split()), re.S) is not None


def sandbox(folder: Path, files: dict[str, str]) -> dict[str, str]:
    """Lay out `folder` as a user's checkout would look; the environment to run in it."""
    shutil.copytree(REPO / "examples", folder / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    bin_dir = folder / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    # Scripts, not symlinks: a link to a virtualenv's python outside its folder loses the virtualenv.
    shims = {"spotfit": f'exec "{sys.executable}" -m spotfit "$@"'}
    shims.update({name: f'exec "{sys.executable}" "$@"' for name in ("python", "python3", "python3.11")})
    for name, line in shims.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{line}\n")
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
    path = f"{bin_dir}:{Path(sys.executable).parent}:{env['PATH']}"
    env.update(SPOTFIT_HOME=str(folder / HOME), PYTHONPATH=str(REPO), PATH=path,
               AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    return env


def _script(block: Block) -> str:
    setup = "".join(f"{line}\n" for line in block.setup)
    if block.teardown:
        setup = f"trap {shlex.quote('; '.join(block.teardown))} EXIT\n" + setup
    if block.lang != "console":
        return f"set -euo pipefail\n{setup}{block.text}"
    lines = ["exec 2>&1", setup, "__rc=0"]
    for n, cmd in enumerate(parse_console(block.text)):
        # `(exit $__rc)` hands the previous command's status to this one, so `echo $?` works.
        lines += [f"printf '\\n{_MARK} {n}\\n'", "(exit $__rc)", cmd.command, "__rc=$?",
                  f"printf '\\n{_MARK} {n} rc=%d\\n' $__rc"]
    return "\n".join(lines) + "\n"


def run_block(block: Block, folder: Path, files: dict[str, str], timeout_s: float) -> None:
    """Run `block` in `folder`; AssertionError naming the doc line and the command on a mismatch."""
    env = sandbox(folder, files)
    proc = subprocess.run(["bash", "-c", _script(block)], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL)
    if block.lang != "console":
        assert proc.returncode == 0, (f"{block.where}: the example failed (exit {proc.returncode}):\n{block.text}\n"
                                      f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
        return
    commands = parse_console(block.text)
    for n, cmd in enumerate(commands):
        status_shown = n + 1 < len(commands) and commands[n + 1].command.split("#")[0].strip() == "echo $?"
        found = re.search(rf"{_MARK} {n}\n(.*)\n{_MARK} {n} rc=(\d+)\n", proc.stdout, re.S)
        assert found, f"{block.where}: `{cmd.command}` did not finish:\n{proc.stdout[-4000:]}"
        output, rc = found.group(1), int(found.group(2))
        if cmd.expected is None and not status_shown:
            assert rc == 0, f"{block.where}: `{cmd.command}` exited {rc}; the doc shows no error:\n{output}"
        elif cmd.expected is not None:
            assert matches(cmd.expected, output), (f"{block.where}: `{cmd.command}` printed\n{output}\n"
                                                   f"--- the doc shows\n{cmd.expected}")
