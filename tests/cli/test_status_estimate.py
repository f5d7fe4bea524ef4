"""`status` says that a running job's step total is an estimate (a later `fit` call may add steps)."""

import json

from typer.testing import CliRunner

from spotfit.cli.app import app
from spotfit.state.db import StateDB
from spotfit.state.states import JobState

JOB_ID = "seeded-20260101-000000-abcd"  # the job of the `seeded_home` fixture


def test_a_running_jobs_total_is_marked_estimated_and_a_finished_ones_is_not(seeded_home):
    running = CliRunner().invoke(app, ["status", JOB_ID])
    assert running.exit_code == 0 and "step 40/~100 (estimate)" in " ".join(running.output.split())
    assert json.loads(CliRunner().invoke(app, ["status", JOB_ID, "--json"]).output)["total_steps_estimated"] is True
    db = StateDB(seeded_home / "state.db")
    db.move_job(JOB_ID, JobState.COMPLETED, "set by the test")
    db.update_job(JOB_ID, step=96, total_steps=96)
    db.close()
    done = CliRunner().invoke(app, ["status", JOB_ID])
    assert done.exit_code == 0 and "step 96/96 " in done.output and "estimate" not in done.output
