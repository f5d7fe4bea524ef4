"""`spotfit controller` for bench/bench_scale.py, with the local backend's attempts simulated in this process.

Everything is the real controller (`controller/service.py`, `pool.py`, the loop, the policy, the
replayed market, the ledger, budgets, leases, the state on PostgreSQL) except the attempts'
processes: 2,000 TensorFlow, or even hollow, processes do not fit a 2-core machine. `SimBackend`
stands in for the local backend. A launch writes the attempt's `progress.json` (phase
`training`, as a runtime does once its script trains: the replay's clock runs from then on) to
the job's store and returns a handle. The attempt then "trains" until the replayed market
preempts it (the loop's `preempt`, then the notice's wall seconds), a stop ends it, or the cloud
reclaims it by itself at a random moment (exponential, mean `SIM_LIFE_S`): a finished attempt
the controller must notice, record, bill and relaunch. Status questions are answered from one
listing of every attempt per second (`backends/aws/poll.py`, as the aws backend does), so the
API calls per minute do not grow with the jobs.

It measures, for each attempt that ends by itself, the wall seconds from its end to the pass that
saw it (the controller's action: record, bill, decide), and for each job the gaps between its
passes (wall times, so that the bench keeps its window's); on SIGTERM it stops the service and
writes them (`--stats FILE`, JSON).

Run by the bench only: `python bench/scale_controller.py --stats F --workers 4 --poll-s 1`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository

from spotfit.attempt import layout  # noqa: E402
from spotfit.attempt.progress import Phase  # noqa: E402
from spotfit.backends.aws.poll import InstancePoll  # noqa: E402
from spotfit.backends.base import AttemptStatus, BackendTraits, LaunchRequest  # noqa: E402
from spotfit.core import registry  # noqa: E402
from spotfit.stores import open_store  # noqa: E402

SIM_LIFE_S = float(os.environ.get("SIM_LIFE_S", "120"))  # mean wall seconds before the cloud reclaims an attempt


@dataclass(frozen=True)
class SimHandle:
    job: str
    attempt: int

    def to_json(self) -> str:
        return json.dumps({"job": self.job, "attempt": self.attempt})


@dataclass
class _Attempt:
    started: float
    ends_at: float  # wall time of its own end (a reclaim), or of a notice's end
    by_itself: bool = True  # ended by the simulated cloud, not by the controller
    seen: bool = False


@dataclass
class Stats:
    """What the bench reads back: delays, pass gaps, calls."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    delays: list[tuple[float, float]] = field(default_factory=list)  # (wall end of an attempt, delay to its pass)
    last_pass: dict[str, float] = field(default_factory=dict)
    passes: list[tuple[str, float]] = field(default_factory=list)  # (job, wall time) of every pass
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (wall time of a pass, gap since the job's last)
    calls: dict[str, int] = field(default_factory=lambda: {"launch": 0, "preempt": 0, "stop": 0, "find": 0})
    first_call: float | None = None

    def passed(self, job: str, now: float) -> None:
        with self.lock:
            last = self.last_pass.get(job)
            if last is not None:
                self.gaps.append((now, now - last))
            self.last_pass[job] = now
            self.passes.append((job, now))

    def call(self, what: str) -> None:
        with self.lock:
            self.calls[what] += 1
            self.first_call = self.first_call or time.monotonic()


STATS = Stats()
ATTEMPTS: dict[tuple[str, int], _Attempt] = {}
LISTING = InstancePoll()
_lock = threading.Lock()
_rng = random.Random(0)


def _listing(_: object) -> dict[str, str]:
    """Every simulated attempt's state: one "API call" answers all of them."""
    now = time.time()
    with _lock:
        return {f"{job}/{n}": ("running" if now < a.ends_at else "terminated") for (job, n), a in ATTEMPTS.items()}


class SimBackend(BackendTraits):
    """The local backend's stand-in: attempts as records in this process (see the module's docstring)."""

    name = "local"
    runs_here = True

    def __init__(self, **_: object) -> None:
        pass

    def launch(self, request: LaunchRequest) -> SimHandle:
        STATS.call("launch")
        now = time.time()
        progress = {"attempt": request.attempt, "pid": os.getpid(), "phase": Phase.TRAINING, "step": 1,
                    "heartbeat_at": now}
        open_store(request.job_url).write_bytes(layout.PROGRESS, json.dumps(progress).encode())
        with _lock:
            ATTEMPTS[request.job_id, request.attempt] = _Attempt(now, now + _rng.expovariate(1.0 / SIM_LIFE_S))
        return SimHandle(request.job_id, request.attempt)

    def load_handle(self, text: str) -> SimHandle:
        doc = json.loads(text)
        return SimHandle(doc["job"], int(doc["attempt"]))

    def find(self, request: LaunchRequest) -> SimHandle | None:
        STATS.call("find")
        key = (request.job_id, request.attempt)
        return SimHandle(*key) if key in ATTEMPTS else None

    def status(self, handle: SimHandle) -> AttemptStatus:
        now = time.time()
        key = f"{handle.job}/{handle.attempt}"
        state = LISTING.states(("sim",), None, [key], _listing, by_id=lambda _, ids: _listing(None))
        if state.get(key, "terminated") == "running":
            return AttemptStatus(running=True)
        with _lock:
            attempt = ATTEMPTS.get((handle.job, handle.attempt))
            if attempt is not None and attempt.by_itself and not attempt.seen:
                attempt.seen = True
                with STATS.lock:
                    STATS.delays.append((attempt.ends_at, now - attempt.ends_at))
        return AttemptStatus(running=False, disrupted=attempt is not None and attempt.by_itself)

    def preempt(self, handle: SimHandle, notice_s: float) -> None:
        STATS.call("preempt")
        self._end(handle, notice_s)

    def stop(self, handle: SimHandle, grace_s: float = 10.0) -> None:
        STATS.call("stop")
        self._end(handle, 0.0)

    def _end(self, handle: SimHandle, after_s: float) -> None:
        """The attempt ends `after_s` from now, unless the simulated cloud ends it sooner."""
        now = time.time()
        with _lock:
            attempt = ATTEMPTS.get((handle.job, handle.attempt))
            if attempt is not None and now + after_s < attempt.ends_at:
                attempt.ends_at, attempt.by_itself = now + after_s, False
        LISTING.forget(("sim",))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stats", required=True)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--poll-s", type=float, default=1.0)
    parser.add_argument("--scan-s", type=float, default=2.0)
    parser.add_argument("--log", help="the service's log lines, to this file (default: none)")
    args = parser.parse_args()
    registry.BACKENDS["local"] = registry.Entry(f"{__name__}:SimBackend")
    from spotfit.controller.loop import Controller
    from spotfit.controller.service import Service

    step = Controller.step

    def timed_step(self: Controller) -> str | None:  # every pass of every job, whatever it does
        STATS.passed(self.job_id, time.time())
        return step(self)

    Controller.step = timed_step  # type: ignore[method-assign]
    from spotfit.host.home import state_target

    log_file = open(args.log, "a", buffering=1) if args.log else None  # noqa: SIM115  (open while it runs)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    Service(state_target(), scan_s=args.scan_s, poll_s=args.poll_s, workers=args.workers, max_jobs=10_000,
            log=lambda line: log_file.write(line + "\n") if log_file else None).run(stop)
    with STATS.lock:
        calls = dict(STATS.calls, list=LISTING.calls)
        span_s = time.monotonic() - (STATS.first_call or time.monotonic())
        Path(args.stats).write_text(json.dumps({"delays": STATS.delays, "gaps": STATS.gaps, "calls": calls,
                                                "passes": STATS.passes, "span_s": span_s}))


if __name__ == "__main__":
    main()
