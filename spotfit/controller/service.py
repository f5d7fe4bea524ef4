"""The long-running controller (`spotfit controller`): drives every job whose lease it can take.

It lives where jobs must be watched while nobody's laptop is open: a Deployment in the cluster
(deploy/), next to a shared state (`SPOTFIT_STATE_URL`). Every `scan_s` seconds it records its
own heartbeat, looks for active jobs (pending, waiting, running; not a batch's queued ones,
which wait for their batch's queue to release them) that no live controller holds,
claims each one's lease (of two controllers claiming at once exactly one wins: the job row is
locked) and drives it with the ordinary controller loop (`loop.Controller`) in a thread of its
own, with its own connection to the state. A driver ends when its job ends or pauses, or when it
finds another controller holding the lease (`LeaseLost`); a controller that dies simply stops
renewing, and after the lease's length another one takes its jobs over and adopts their running
attempts.

Example (one scan of an empty state):

>>> import os, tempfile
>>> service = Service(os.path.join(tempfile.mkdtemp(), "state.db"), log=lambda line: None)
>>> service.scan()
[]
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable

from spotfit.errors import SpecError, SpotfitError
from spotfit.state import lease
from spotfit.state.db import StateDB

# A job whose driver crashed, or whose spec this version cannot read, is not picked up again by this process
# for this long.
CRASH_REST_S = 60.0


class Service:
    """One long-running controller process over the state at `target` (a path or a URL)."""

    def __init__(self, target: str, scan_s: float = 2.0, poll_s: float = 1.0, max_jobs: int = 32,
                 log: Callable[[str], None] = print):
        self.target = target
        self.scan_s = scan_s
        self.poll_s = poll_s
        self.max_jobs = max_jobs
        self.log = log
        self.holder = lease.this_process()
        self.lease_s = lease.ttl_s()
        self.db = StateDB(target)
        self.drivers: dict[str, threading.Thread] = {}
        self.resting: dict[str, float] = {}  # job -> monotonic time until which a crashed job is left alone

    def run(self, stop: threading.Event | None = None) -> None:
        """Scan and drive until `stop` is set (or the process ends)."""
        stop = stop or threading.Event()
        self.log(f"spotfit controller {self.holder.key} on {self.db.path} ({self.db.dialect}): lease "
                 f"{self.lease_s:g} s, scan every {self.scan_s:g} s, at most {self.max_jobs} jobs")
        try:
            while not stop.is_set():
                self.scan()
                stop.wait(self.scan_s)
        finally:
            self.db.controller_gone(self.holder)
            self.db.close()

    def scan(self) -> list[str]:
        """One pass: heartbeat, then start a driver for each job whose lease this process wins."""
        self.drivers = {job: t for job, t in self.drivers.items() if t.is_alive()}
        self.db.controller_seen(self.holder, len(self.drivers))
        started = []
        now = time.monotonic()
        for job_id in self.db.claimable_jobs(self.holder):
            if len(self.drivers) >= self.max_jobs:
                break
            if job_id in self.drivers or self.resting.get(job_id, 0.0) > now:
                continue  # ours already, or it just crashed here
            if not self.db.claim_lease(job_id, self.holder, self.lease_s):
                continue  # another controller won the row lock
            driver = threading.Thread(target=self._drive, args=(job_id,), name=f"drive-{job_id}", daemon=True)
            self.drivers[job_id] = driver
            driver.start()
            started.append(job_id)
        return started

    def _drive(self, job_id: str) -> None:
        """Drive one job to its end (or until it pauses or another controller has it) on its own connection."""
        from spotfit.controller.loop import Controller

        self.log(f"{job_id}: leased, driving it")
        db = StateDB(self.target)
        try:
            state = Controller(db, job_id, poll_s=self.poll_s, for_others=True).run()
            self.log(f"{job_id}: {state}")
        except (lease.LeaseLost, lease.LeaseTaken) as exc:
            self.log(f"{job_id}: {exc.message}")
        except SpecError as exc:  # it would fail again at every scan: another spotfit version may drive it
            self.resting[job_id] = time.monotonic() + CRASH_REST_S
            self.log(f"{job_id}: stopped driving: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
                     + f"; this process leaves it alone for {CRASH_REST_S:g} s")
        except SpotfitError as exc:
            self.log(f"{job_id}: stopped driving: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        except Exception:  # noqa: BLE001  (one job's bug must not end the controller of every other job)
            self.resting[job_id] = time.monotonic() + CRASH_REST_S
            self.log(f"{job_id}: controller crashed; this process tries it again in {CRASH_REST_S:g} s, "
                     f"another controller may sooner:\n{traceback.format_exc()}")
        finally:
            db.release_lease(job_id, self.holder)  # a no-op when the loop released it or another holder has it
            db.close()
