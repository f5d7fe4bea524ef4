"""Fixtures of the CLI tests: a home with one recorded job, and checks that bad input was refused.

`refused(*args)` runs `spotfit ARGS` in this process (typer's CliRunner, the same root group as
the console script) and asserts what the CLI promises for bad input: exit 2, nothing on stdout,
exactly one `error:` line on stderr (optionally followed by one `hint:` line), no traceback,
and the state DB's jobs, attempts and events rows and the home's store exactly as before.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spotfit.cli import app
from spotfit.state.db import StateDB
from spotfit.state.states import JobState

JOB_ID = "seeded-20260101-000000-abcd"
JOB_NAME = "seeded"
TABLES = ("jobs", "attempts", "events")


@pytest.fixture(autouse=True)
def nothing_launches(monkeypatch, tmp_path):
    """What bad input must never reach: launching, serving, probing a cloud or TensorFlow.

    Each stand-in raises, so reaching one ends the command with exit 1 and fails the test with
    its name. The tests also run in an empty folder, so that no generated path names a file
    of the repository.
    """

    def never(name):
        def _raise(*args, **kwargs):
            raise AssertionError(f"{name} was reached with bad input")
        return _raise

    for target in ("spotfit.sdk.run_job", "spotfit.sdk.start_detached", "spotfit.backends.aws.gc.collect",
                   "spotfit.attempt.tensorboard_server.serve", "spotfit.runtime.doctor.run", "spotfit.ui.server.serve"):
        monkeypatch.setattr(target, never(target))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def seeded_home(spotfit_home: Path) -> Path:
    """`$SPOTFIT_HOME` with one running job that has one attempt and one event."""
    db = StateDB(spotfit_home / "state.db")
    db.create_job(JOB_ID, JOB_NAME, spec_json='{"name": "seeded", "script": "train.py", "backend": "local"}',
                  store_url=f"file://{spotfit_home}/store/jobs/{JOB_ID}")
    db.move_job(JOB_ID, JobState.RUNNING, "set by the test")
    db.update_job(JOB_ID, total_steps=100, step=40)
    db.add_attempt(JOB_ID, backend="local", zone="us-west-2b", market="spot", state="running", started_at=1.0,
                   trace_start_s=0.0, start_step=0)
    db.add_event(JOB_ID, "launched", "attempt 1 launched")
    db.close()
    (spotfit_home / "store" / "jobs" / JOB_ID).mkdir(parents=True)
    return spotfit_home


def _recorded(home: Path) -> dict:
    """The jobs, attempts and events rows (empty when there is no DB) and the store's files."""
    rows: dict = {table: [] for table in TABLES}
    if (home / "state.db").exists():
        with closing(sqlite3.connect(home / "state.db")) as conn:
            rows = {table: conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() for table in TABLES}
    rows["store"] = sorted(str(p) for p in (home / "store").rglob("*")) if (home / "store").exists() else []
    return rows


def check_refusal(code: int, stdout: str, stderr: str, what: str) -> str:
    """Assert one clear line for bad input; returns the `error:` line."""
    context = f"{what}: exit {code}\nstdout: {stdout[-1000:]!r}\nstderr: {stderr[-3000:]!r}"
    assert "Traceback" not in stderr, context
    assert code == 2, context
    assert stdout == "", context
    lines = stderr.splitlines()
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), context
    assert len(lines) == 1 or lines[1].startswith("hint: "), context
    assert len(lines[0]) <= len("error: ") + 500, context
    return lines[0]


@pytest.fixture
def refused(spotfit_home: Path):
    """Run `spotfit ARGS` in process; assert it was refused as bad input, changing nothing."""
    runner = CliRunner()

    def run(*args: str) -> str:
        before = _recorded(spotfit_home)
        result = runner.invoke(app, list(args))
        line = check_refusal(result.exit_code, result.stdout, result.stderr, f"spotfit {list(args)!r}"[:500])
        assert _recorded(spotfit_home) == before, f"spotfit {list(args)!r} changed the state DB or the store"
        return line

    return run


@pytest.fixture
def refusal():
    """`check_refusal(code, stdout, stderr, what)`, for commands run as real processes."""
    return check_refusal


@pytest.fixture
def recorded(spotfit_home: Path):
    """A callable returning the state DB's rows and the store's files, to compare before and after."""
    return lambda: _recorded(spotfit_home)
