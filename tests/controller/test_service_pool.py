"""One `spotfit controller` drives more jobs than it has workers, on one state connection per worker.

Six hollow jobs (spotfit/hollow/: real attempt processes, no TensorFlow) are submitted to a
shared SQLite state; a `Service` with two workers drives them all to `completed` in this process.
Every connection to the state that opens meanwhile is counted where connections are made
(`state.dialect.Sqlite`; the jobs' budgets use the team's budget tables too): the service's own
and one per worker, whatever the number of jobs.
"""

from __future__ import annotations

import threading

import pytest

from spotfit import sdk
from spotfit.controller.service import Service
from spotfit.host.home import state_target
from spotfit.state.dialect import Sqlite
from tests.support.hollow_jobs import write_hollow_spec
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

JOBS, WORKERS = 6, 2


@pytest.mark.usefixtures("hollow")
def test_six_jobs_on_two_workers_use_three_state_connections(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTFIT_STATE_URL", f"sqlite:///{tmp_path / 'team.db'}")
    ids = []
    for i in range(JOBS):
        text = f"name: pool-{i}\nscript: train.py\nmarket: {{trace: null}}\nbudget_usd: 100\n"
        spec = write_hollow_spec(tmp_path / f"job{i}", text,
                                 epochs=1, steps_per_epoch=4)
        ids.append(sdk.submit(str(spec)))
    db = sdk.db()
    opened: list[str] = []
    connect = Sqlite.__init__

    def counted(self, path):  # every connection to the state, whichever part opens it
        opened.append(threading.current_thread().name)
        connect(self, path)

    monkeypatch.setattr(Sqlite, "__init__", counted)
    lines: list[str] = []
    stop = threading.Event()

    def serve() -> None:  # a SQLite connection stays in the thread that opened it
        Service(state_target(), scan_s=0.2, poll_s=0.1, workers=WORKERS, log=lines.append).run(stop)

    runner = threading.Thread(target=serve, name="service", daemon=True)
    runner.start()
    try:
        # Completed, and its driving over: the worker saw the end, logged it and released the lease.
        wait_for(lambda: all((j := db.get_job(i))["state"] == "completed" and j["lease_owner"] is None for i in ids),
                 240, lambda: "every job completed and released; the controller said:\n" + "\n".join(lines[-40:]))
    finally:
        stop.set()
        runner.join(60)
    assert not runner.is_alive()
    # The service's own and one per worker: not one per job.
    assert sorted(opened) == [*(f"controller-worker-{i}" for i in range(WORKERS)), "service"], opened
    assert sum(line.endswith(": completed") for line in lines) == JOBS
    for job_id in ids:  # its one attempt billed once
        assert [a["state"] for a in db.attempts(job_id)] == ["completed"]
