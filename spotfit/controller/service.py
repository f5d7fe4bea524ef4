"""The long-running controller (`spotfit controller`): drives every job whose lease it can take.

It lives where jobs must be watched while nobody's laptop is open: a Deployment in the cluster
(deploy/), next to a shared state (`SPOTFIT_STATE_URL`). Every `scan_s` seconds it records its
own heartbeat, looks for active jobs (pending, waiting, running; not a batch's queued ones,
which wait for their batch's queue to release them) that no live controller holds, claims each
one's lease (of two controllers claiming at once exactly one wins: the job row is locked) and
hands it to the least loaded of a few workers (`controller/pool.py`: threads with one state
connection each, stepping the ordinary controller loop of each of their jobs in turn). A job's
driving ends when the job ends or pauses, or when another controller holds its lease
(`LeaseLost`); a controller that dies simply stops renewing, and after the lease's length
another one takes its jobs over and adopts their running attempts.

Example (one scan of an empty state):

>>> import os, tempfile
>>> service = Service(os.path.join(tempfile.mkdtemp(), "state.db"), log=lambda line: None)
>>> service.scan()
[]
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from spotfit.controller.pool import CRASH_REST_S, Worker
from spotfit.state import lease
from spotfit.state.db import StateDB

MAX_WORKERS = 9  # with the service's own connection, at most 10 per controller
DEFAULT_WORKERS = 4
DEFAULT_MAX_JOBS = 2000


class Service:
    """One long-running controller process over the state at `target` (a path or a URL)."""

    def __init__(self, target: str, scan_s: float = 2.0, poll_s: float = 1.0, max_jobs: int = DEFAULT_MAX_JOBS,
                 workers: int = DEFAULT_WORKERS, log: Callable[[str], None] = print):
        self.target = target
        self.scan_s = scan_s
        self.poll_s = poll_s
        self.max_jobs = max_jobs
        self.n_workers = max(1, min(workers, MAX_WORKERS))
        self.log = log
        self.holder = lease.this_process()
        self.lease_s = lease.ttl_s()
        self.db = StateDB(target)
        self.workers: list[Worker] = []  # started with the first job
        self.driving: dict[str, Worker] = {}  # job -> the worker that drives it
        self.resting: dict[str, float] = {}  # job -> monotonic time until which a crashed job is left alone
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)

    def run(self, stop: threading.Event | None = None) -> None:
        """Scan and drive until `stop` is set (or the process ends)."""
        stop = stop or threading.Event()
        self.log(f"spotfit controller {self.holder.key} on {self.db.path} ({self.db.dialect}): lease "
                 f"{self.lease_s:g} s, scan every {self.scan_s:g} s, at most {self.max_jobs} jobs on "
                 f"{self.n_workers} workers")
        try:
            while not stop.is_set():
                self.scan()
                stop.wait(self.scan_s)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the workers (each releases the jobs it drives) and say this controller is gone."""
        for worker in self.workers:
            worker.stop()
        for worker in self.workers:
            worker.join()
        self.db.controller_gone(self.holder)
        self.db.close()

    def scan(self) -> list[str]:
        """One pass: heartbeat, then hand each job whose lease this process wins to a worker."""
        with self._lock:
            driving = len(self.driving)
        self.db.controller_seen(self.holder, driving)
        started = []
        now = time.monotonic()
        for job_id in self.db.claimable_jobs(self.holder):
            with self._lock:
                if len(self.driving) >= self.max_jobs:
                    break
                if job_id in self.driving or self.resting.get(job_id, 0.0) > now:
                    continue  # ours already, or it just crashed here
            if not self.db.claim_lease(job_id, self.holder, self.lease_s):
                continue  # another controller won the row lock
            worker = self._least_loaded()
            with self._lock:
                self.driving[job_id] = worker
            worker.add(job_id)
            started.append(job_id)
        return started

    def wait_ended(self, job_id: str, timeout_s: float) -> bool:
        """Wait until this process no longer drives `job_id`; False if it still does after `timeout_s`."""
        with self._ended:
            return self._ended.wait_for(lambda: job_id not in self.driving, timeout_s)

    def _least_loaded(self) -> Worker:
        if len(self.workers) < self.n_workers:
            worker = Worker(len(self.workers), self.target, self.poll_s, self._done, self.log)
            self.workers.append(worker)
            worker.start()
            return worker
        return min(self.workers, key=lambda w: w.load)

    def _done(self, job_id: str, rest: bool) -> None:
        with self._ended:
            self.driving.pop(job_id, None)
            if rest:
                self.resting[job_id] = time.monotonic() + CRASH_REST_S
            self._ended.notify_all()
