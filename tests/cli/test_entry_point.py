"""The real entry point (`python -m spotfit`, a separate process) and `--debug`.

The fuzzing runs in process; these few cases prove that the console entry point takes the
same path: one line and exit 2 for bad input, one line and exit 1 for an unexpected error,
the traceback only with `--debug`, and no TensorFlow for `spotfit --help`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from spotfit.cli import app
from spotfit.errors import SpecError

# Not random, so that every run feeds the same bytes: every byte value, in a scrambled order.
NOT_TEXT = bytes((i * 167 + 13) % 256 for i in range(4096))


def spotfit(*args: str | bytes, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spotfit", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, env=env)


@pytest.mark.parametrize("content", [NOT_TEXT, "name: jöb\nscript: train.py\n".encode("utf-16")],
                         ids=["random-bytes", "utf-16"])
def test_a_file_that_is_not_a_spec(tmp_path, seeded_home, recorded, refusal, content):
    path = tmp_path / "spotfit.yaml"
    path.write_bytes(content)
    before = recorded()
    out = spotfit("run", str(path))
    assert "UTF" in refusal(out.returncode, out.stdout, out.stderr, "run")
    assert recorded() == before


def test_a_100_mib_file(tmp_path, seeded_home, recorded, refusal):
    path = tmp_path / "spotfit.yaml"
    with open(path, "wb") as f:
        f.truncate(100 * 2**20)  # sparse
    before = recorded()
    out = spotfit("run", str(path))
    assert "104,857,600 bytes" in refusal(out.returncode, out.stdout, out.stderr, "run")
    assert recorded() == before


@pytest.mark.parametrize("args", [["list", "--limit", "nan"], ["simulate", "--work-h", "inf"], ["status", ""],
                                  ["cancel", b"\xff\xfe-not-utf-8"], ["nope"]],
                         ids=["typer-parse", "sdk-check", "empty-ref", "undecodable-argv", "unknown-verb"])
def test_bad_arguments(seeded_home, recorded, refusal, args):
    before = recorded()
    out = spotfit(*args)
    refusal(out.returncode, out.stdout, out.stderr, repr(args))
    assert recorded() == before


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(tmp_path):
    (tmp_path / "a-file").write_text("a file where a folder above the home should be")
    env = {**os.environ, "SPOTFIT_HOME": str(tmp_path / "a-file" / "home")}  # (a home that is a file: one error line)
    out = spotfit("list", env=env)
    assert out.returncode == 1 and out.stdout == "", out.stderr
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: unexpected NotADirectoryError: ") and line.endswith(
        "(rerun with --debug for the traceback)"), line
    debug = spotfit("--debug", "list", env=env)
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr and "NotADirectoryError" in debug.stderr


def test_help_imports_no_tensorflow():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "spotfit", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "validate" in out.stdout
    imported = [line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")]
    assert "spotfit.cli" in imported
    assert not [m for m in imported if m.split(".")[0] in ("tensorflow", "keras")]


def test_status_loads_neither_the_spec_models_nor_the_stores(seeded_home):
    """`spotfit status` reads the state DB only: the spec (pydantic models) and fsspec load lazily."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "spotfit", "status", "seeded"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "seeded" in out.stdout, out.stderr[-2000:]
    imported = [line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")]
    assert "spotfit.sdk" in imported
    assert not [m for m in imported
                if m in ("spotfit.spec.job", "spotfit.spec.rules", "spotfit.stores", "fsspec", "yaml")]


def test_no_arguments_prints_the_help():
    out = spotfit()
    assert out.returncode == 2 and "Commands" in out.stdout and "Traceback" not in out.stderr


# --debug, in process ------------------------------------------------------------------------


def test_debug_raises_spotfit_errors_with_their_traceback(tmp_path):
    missing = str(tmp_path / "missing.yaml")
    result = CliRunner().invoke(app, ["--debug", "validate", missing])
    assert isinstance(result.exception, SpecError)
    assert CliRunner().invoke(app, ["validate", missing]).exit_code == 2  # the next run without --debug


def test_an_unexpected_exception_in_a_verb(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr("spotfit.sdk.list_jobs", broken)
    result = CliRunner().invoke(app, ["list"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: unexpected RuntimeError: first line second line (rerun with --debug for the traceback)"]
    debug = CliRunner().invoke(app, ["--debug", "list"])
    assert isinstance(debug.exception, RuntimeError)
