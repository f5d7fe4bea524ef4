"""A sweep on a team's PostgreSQL state: its study and its rows live there, nothing under $SPOTFIT_HOME.

With `SPOTFIT_STATE_URL` on a real PostgreSQL server (the session's `postgres` fixture, a schema
of this test's own), a two-trial sweep of the tiny script (on hollow attempts: the trials' metrics
differ by their params, tests/support/hollow_jobs.py) runs to its end: a long-running
`spotfit controller` drives the trial jobs (on a shared state nothing is started on the
submitting machine), Optuna keeps the study in PostgreSQL and the sweep's bookkeeping is there
too. The test reads both back with SQL and checks that no `optuna.db` or `sweeps.db` appeared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import psutil
import psycopg
import pytest

from tests.support.jobs import spotfit_cmd
from tests.support.postgres import schema_url
from tests.sweep.tiny import SWEEP, job_folder

pytestmark = pytest.mark.slow


@pytest.fixture
def controller(postgres, tmp_path):
    """The shared state's URL and its environment, with one `spotfit controller` on it (killed by PID at the end)."""
    url = schema_url(postgres.url, "t_sweep_pg")
    env = {**os.environ, "SPOTFIT_STATE_URL": url}
    with open(tmp_path / "controller.log", "wb") as log:
        proc = subprocess.Popen(spotfit_cmd("controller", "--scan-s", "0.2", "--poll-s", "0.1"), env=env,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    handle = psutil.Process(proc.pid)
    yield url, env
    if handle.is_running():
        os.killpg(proc.pid, signal.SIGKILL)  # it and the runtimes it started: its process group
    proc.wait(60)


def test_a_sweep_on_postgres_keeps_its_study_and_rows_there(controller, tmp_path, spotfit_home):
    url, env = controller
    spec_path = job_folder(tmp_path / "sweep", "tinypg", ["--epochs", "1"], hollow={})
    sweep_file = spec_path.parent / "sweep.yaml"
    sweep_file.write_text(SWEEP.replace("trials: 12", "trials: 2").replace("pruner: asha", "pruner: none"))

    out = subprocess.run(spotfit_cmd("sweep", str(sweep_file), "--json"), capture_output=True, text=True,
                         env=env, timeout=600, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "completed" and [t["state"] for t in doc["trials"]] == ["completed", "completed"]

    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT id, state, lease_owner FROM sweeps").fetchall() == [(doc["id"], "completed", None)]
        rows = conn.execute("SELECT number, job_id, state, value FROM sweep_trials WHERE sweep_id = %s ORDER BY number",
                            (doc["id"],)).fetchall()
        assert rows == [(t["number"], t["job_id"], "completed", t["value"]) for t in doc["trials"]]
        jobs = conn.execute("SELECT id, state FROM jobs ORDER BY id").fetchall()
        assert jobs == sorted((t["job_id"], "completed") for t in doc["trials"])
        # Optuna's own tables, in the same database: the study is named by the sweep id.
        [(study_id,)] = conn.execute("SELECT study_id FROM studies WHERE study_name = %s", (doc["id"],)).fetchall()
        values = conn.execute("SELECT t.number, v.value FROM trials t JOIN trial_values v USING (trial_id) "
                              "WHERE t.study_id = %s AND t.state = 'COMPLETE' ORDER BY t.number",
                              (study_id,)).fetchall()
        assert values == [(t["number"], t["value"]) for t in doc["trials"]]
    assert not [p.name for p in spotfit_home.rglob("*.db*")], "a SQLite file appeared under $SPOTFIT_HOME"

    listed = subprocess.run(spotfit_cmd("list", "--json"), capture_output=True, text=True, env=env, timeout=120)
    assert {j["group"] for j in json.loads(listed.stdout)} == {doc["id"]}  # read from PostgreSQL
