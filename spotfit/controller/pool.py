"""Many jobs on a few threads: the workers of `spotfit controller` (`controller/service.py`).

A fixed number of workers (threads), each with one connection to the state, drive the jobs the
service hands them: one pass of a job's loop at a time (`Controller.step`), each job once every
`poll_s` seconds, the job due first first. However many jobs a controller drives, the state sees
`workers` connections from them (plus the service's own), and at most `workers` passes (so at
most `workers` launches, signals or backend calls) are under way at once: a burst of relaunches
after a zone dies queues behind them instead of opening hundreds of API calls together. Each
attempt is still billed from its own launch time, which its pass records.

A worker ends a job's driving when the job ends or pauses, when another controller holds its
lease, or when its pass fails (the service decides whether this process rests from the job).

Example (a worker with nothing to drive stops at once):

>>> import os, tempfile, threading
>>> worker = Worker(0, os.path.join(tempfile.mkdtemp(), "state.db"), poll_s=1.0, done=print, log=print)
>>> worker.start(); worker.stop(); worker.join(10); worker.is_alive()
False
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spotfit.errors import SpecError, SpotfitError
from spotfit.state import lease
from spotfit.state.db import StateDB

if TYPE_CHECKING:
    from spotfit.controller.loop import Controller

# How a job's driving ended, for the service: `rest` = this process leaves the job alone for a while
# (its driver crashed, or this version cannot read its spec), so that it does not crash at every scan.
Done = Callable[[str, bool], None]
# A job whose driver crashed, or whose spec this version cannot read, is not picked up again by this process
# for this long.
CRASH_REST_S = 60.0


@dataclass(order=True)
class _Due:
    """One driven job in a worker's queue, ordered by when its next pass is due."""

    due: float
    seq: int
    job_id: str = field(compare=False)
    controller: Controller | None = field(default=None, compare=False)


class Worker(threading.Thread):
    """One thread and one state connection, stepping the loops of the jobs given to it."""

    def __init__(self, index: int, target: str, poll_s: float, done: Done, log: Callable[[str], None]):
        super().__init__(name=f"controller-worker-{index}", daemon=True)
        self.target = target
        self.poll_s = poll_s
        self.done = done
        self.log = log
        self.holder = lease.this_process()
        self._queue: list[_Due] = []  # a heap: the job due first on top
        self._inbox: list[str] = []  # jobs handed over, not yet queued (under `_lock`)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._seq = itertools.count()
        self.load = 0  # jobs given and not yet ended (the service puts a new job on the least loaded worker)

    def add(self, job_id: str) -> None:
        """Drive `job_id` (whose lease the service has just claimed) from this worker's next turn on."""
        with self._lock:
            self._inbox.append(job_id)
            self.load += 1
        self._wake.set()

    def stop(self) -> None:
        """End after the pass under way: every job still driven is released (another controller takes it)."""
        self._stopping.set()
        self._wake.set()

    def run(self) -> None:
        db = StateDB(self.target)
        try:
            while not self._stopping.is_set():
                with self._lock:
                    for job_id in self._inbox:
                        heapq.heappush(self._queue, _Due(time.monotonic(), next(self._seq), job_id))
                    self._inbox.clear()
                wait_s = self._queue[0].due - time.monotonic() if self._queue else None
                if wait_s is None or wait_s > 0:
                    self._wake.wait(wait_s)
                    self._wake.clear()
                    continue
                entry = heapq.heappop(self._queue)
                if self._pass(db, entry):
                    entry.due = time.monotonic() + self.poll_s
                    heapq.heappush(self._queue, entry)
        finally:
            for entry in self._queue:
                self._end(db, entry, rest=False)
            db.close()

    def _pass(self, db: StateDB, entry: _Due) -> bool:
        """One pass of the job's loop; False when its driving is over (the job is then released)."""
        from spotfit.controller.loop import Controller

        job_id, rest = entry.job_id, False
        try:
            if entry.controller is None:
                self.log(f"{job_id}: leased, driving it")
                entry.controller = Controller(db, job_id, poll_s=self.poll_s, for_others=True)
                entry.controller.claim()
                entry.controller.begin()
            state = entry.controller.step()
            if state is None:
                return True
            self.log(f"{job_id}: {state}")
        except (lease.LeaseLost, lease.LeaseTaken) as exc:
            self.log(f"{job_id}: {exc.message}")
        except SpecError as exc:  # it would fail again at every scan: another spotfit version may drive it
            rest = True
            self.log(f"{job_id}: stopped driving: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
                     + f"; this process leaves it alone for {CRASH_REST_S:g} s")
        except SpotfitError as exc:
            self.log(f"{job_id}: stopped driving: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        except Exception:  # noqa: BLE001  (one job's bug must not end the controller of every other job)
            rest = True
            self.log(f"{job_id}: controller crashed; this process tries it again in {CRASH_REST_S:g} s, "
                     f"another controller may sooner:\n{traceback.format_exc()}")
        self._end(db, entry, rest)
        return False

    def _end(self, db: StateDB, entry: _Due, rest: bool) -> None:
        """Stop driving a job: its controller's last words, then the lease freed (a no-op when the loop
        released it or another holder has it)."""
        try:
            if entry.controller is not None:
                entry.controller.end()
        except Exception:  # noqa: BLE001  (the job is released below whatever its end did)
            self.log(f"{entry.job_id}: its controller's end failed:\n{traceback.format_exc()}")
        finally:
            try:
                db.release_lease(entry.job_id, self.holder)
            finally:
                with self._lock:
                    self.load -= 1
                self.done(entry.job_id, rest)
