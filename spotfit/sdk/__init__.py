"""What the CLI and scripts call: one function per verb, returning plain data.

Jobs: validate, submit, run_job, status, logs, cancel, resume, list_jobs, cost, cost_all; budgets:
budget_list, budget_set, budget_rm. Market and tools: plan, catalog, simulate, dry_run, gc, doctor,
tensorboard. The web dashboard reads jobs through this module, so it starts from its own package
(`spotfit.ui.launch.ui`), not from here.
Interactive work (notebooks, ssh, port-forward) is in `spotfit.interactive`.

Each function takes plain arguments and returns plain data (dicts that are also the `--json`
documents of the CLI), so scripts can drive spotfit without the CLI; the CLI calls nothing else
(but `spotfit.ui.launch` for `spotfit ui`).
This module holds a job's lifecycle (run, resume, cancel, wait) and names every verb; the others
live by family: `submit` (validate, submit), `reports` (status, list, events, logs), `costs` (cost,
cost_all), `budgets` (budget_list, budget_set, budget_rm), `market` (plan, catalog, simulate,
market record) and `tools` (dry run, gc, doctor, TensorBoard), over `context` (which
state DB the verbs read).

A job runs with `sdk.run_job(sdk.submit("examples/digits/spotfit.yaml"))` (it trains, so it is
not a docstring example). Example:

>>> import spotfit.sdk as sdk
>>> offer = sdk.catalog(accelerator="V100", count=1, cloud="aws", spot=True)["offers"][0]
>>> offer["instance_type"], offer["spot_usd_per_h"] < offer["on_demand_usd_per_h"]
('p3.2xlarge', True)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from spotfit.attempt.layout import boot_log as boot_log_key
from spotfit.controller import job_secrets
from spotfit.core import arguments
from spotfit.errors import UsageError
from spotfit.host.home import home, state_is_shared, state_target
from spotfit.sdk.budgets import budget_list, budget_rm, budget_set
from spotfit.sdk.context import controller_alive, db, find_job, live_controllers, reading_from
from spotfit.sdk.costs import cost, cost_all
from spotfit.sdk.market import MAX_STARTS, catalog, market_record, plan, simulate
from spotfit.sdk.move import Move, move
from spotfit.sdk.reports import BOOT_LOG_LINES, events, list_jobs, logs, status
from spotfit.sdk.submit import duplicate_error, parse_preempt_at, submit, submit_spec, validate
from spotfit.sdk.tools import doctor, dry_run, gc, tensorboard
from spotfit.state.db import StateDB
from spotfit.state.records import JobRecord, raw_spec_of
from spotfit.state.states import AttemptState, JobState, StopRequest

if TYPE_CHECKING:
    from types import FrameType

    from spotfit.controller.loop import Controller

__all__ = [
    "BOOT_LOG_LINES", "MAX_STARTS", "Move", "boot_log_key", "budget_list", "budget_rm", "budget_set", "cancel",
    "catalog", "controller_alive", "cost", "cost_all", "db", "doctor", "dry_run", "duplicate_error", "events",
    "find_job", "gc", "list_jobs", "live_controllers", "logs", "market_record", "parse_preempt_at", "plan",
    "reading_from", "resume", "run_job", "serve_controller", "simulate", "start_detached", "status", "submit",
    "submit_spec", "tensorboard", "validate", "wait",
]


def run_job(job_id: str, on_update: Callable[[], None] | None = None) -> dict[str, Any]:
    """Drive a submitted job to its end in this process; returns its status document.

    Ctrl-C (SIGINT, in the main thread) never leaves an unsupervised attempt: the controller asks
    the attempt to save a checkpoint and stop, records it, and the job ends `stopped`
    (`interrupted: true` in the document, and `interrupt_signal`, its number); `spotfit resume JOB`
    continues it from that step. SIGTERM (`timeout`, systemd, a CI runner) and SIGHUP (the terminal
    closed) do the same.
    """
    from spotfit.controller.loop import Controller

    controller = Controller(db(), job_id, on_update=on_update)
    with _ctrl_c_stops(controller, job_id):
        controller.run()
    if not controller.interrupted:
        return status(job_id)
    return {**status(job_id), "interrupted": True, "interrupt_signal": controller.interrupt_signal}


@contextmanager
def _ctrl_c_stops(controller: Controller, job_id: str) -> Iterator[None]:
    """While the block runs, SIGINT, SIGTERM or SIGHUP asks `controller` to stop the job with a checkpoint.

    Said on stderr; the first such signal is kept on the controller (`interrupt_signal`).
    """
    import signal
    import threading

    from spotfit.controller.loop import INTERRUPTS

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def interrupt(signum: int, frame: FrameType | None) -> None:
        again = controller.interrupted
        if not again:
            controller.interrupt_signal = signum
        controller.interrupted = True
        try:  # after SIGHUP the terminal may be gone
            print(f"\n{'still stopping' if again else 'interrupted'}: job {job_id}'s attempt saves a checkpoint "
                  f"and stops (no attempt is left running); `spotfit resume {job_id}` continues it",
                  file=sys.stderr, flush=True)
        except OSError:
            pass

    previous = {sig: signal.signal(sig, interrupt) for sig in INTERRUPTS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def start_detached(job_id: str) -> int | None:
    """Start the job's controller as a detached process (survives this shell); returns its pid.

    On a shared state (`$SPOTFIT_STATE_URL`) nothing starts here: the long-running
    `spotfit controller`s drive the job (None), so this machine may close at once.
    """
    if state_is_shared():
        return None
    log = home() / "logs" / job_id / "controller.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "spotfit.controller", job_id],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ},
        )
    return proc.pid


def serve_controller(scan_s: float = 2.0, poll_s: float = 1.0, max_jobs: int = 2000, workers: int = 4,
                     log: Callable[[str], None] = print, metrics_port: int | None = None,
                     metrics_host: str = "127.0.0.1") -> None:
    """Run a long-running controller on this state until the process ends (`spotfit controller`).

    With `metrics_port`, it also serves the state's Prometheus metrics on `metrics_host:metrics_port/metrics`
    (`spotfit/controller/metrics.py`).
    """
    from spotfit.controller.service import Service

    arguments.number("--scan-s", scan_s, low=0, high=3600, low_open=True, hint="Pass --scan-s 2.")
    arguments.number("--poll-s", poll_s, low=0, high=60, low_open=True, hint="Pass --poll-s 1.")
    arguments.number("--max-jobs", max_jobs, low=1, high=10_000, hint="Pass --max-jobs 2000.")
    arguments.number("--workers", workers, low=1, high=9, hint="Pass --workers 4 (at most 9: with the "
                                                               "controller's own, 10 state connections).")
    if metrics_port is not None:
        from spotfit.controller import metrics

        arguments.number("--metrics-port", metrics_port, low=1, high=65_535, hint="Pass --metrics-port 9464.")
        arguments.text("--metrics-host", metrics_host, hint="Pass --metrics-host 127.0.0.1 (0.0.0.0 in a pod).")
        server = metrics.serve(str(state_target()), metrics_host, metrics_port)
        log(f"metrics on http://{metrics_host}:{server.server_port}/metrics")
    Service(state_target(), scan_s=scan_s, poll_s=poll_s, max_jobs=max_jobs, workers=workers, log=log).run()


def resume(ref: str, detach: bool = False, on_update: Callable[[], None] | None = None,
           change: Move | None = None) -> dict[str, Any]:
    """Give a job whose controller died a new one: it adopts or relaunches the attempt.

    With `change` (`spotfit resume JOB --accelerator A100 --count 4`, `--spec NEW.yaml`), the job moves
    first: its next attempt runs on the new resources from its last checkpoint (`sdk/move.py`).
    """
    job = find_job(db(), ref)
    if job["state"] == JobState.QUEUED:
        raise UsageError(
            f"Job {job['id']} is queued: it waits in its batch for a slot, and its batch's queue starts it.",
            hint="`spotfit list` shows its batch: `spotfit batch resume BATCH` if that queue died, "
                 f"`spotfit cancel {job['id']}` to drop the job.",
        )
    if not JobState(job["state"]).is_resumable():
        raise UsageError(
            f"Job {job['id']} is {job['state']}: only pending, running, waiting, paused or stopped jobs resume.",
            hint="Start a new run with `spotfit run JOB.yaml`.",
        )
    if controller_alive(job):
        raise UsageError(
            f"Job {job['id']} already has a live controller ({job['lease_owner']}: host/pid/token).",
            hint=f"Watch it with `spotfit status {job['id']}`.",
        )
    if change is not None and not change.is_empty():
        move(db(), job, change)
    if job["state"] == JobState.STOPPED:  # stopped by a rule or pruned: it goes on from its checkpoint
        db().move_job(job["id"], JobState.PAUSED, "resuming a stopped job", clear_request=True)
    if detach and state_is_shared() and job["state"] in (JobState.PAUSED, JobState.STOPPED):
        # The long-running controllers pick up waiting jobs, not paused ones.
        db().move_job(job["id"], JobState.WAITING, "resumed")
        db().add_event(job["id"], "resumed", "paused job resumed")
    if detach:
        start_detached(job["id"])
        return status(job["id"])
    return run_job(job["id"], on_update)



def cancel(ref: str) -> dict[str, Any]:
    """Ask the job to stop: its controller saves a checkpoint and stops the attempt."""
    state_db = db()
    job = find_job(state_db, ref)
    if JobState(job["state"]).is_terminal():
        return status(job["id"])
    state_db.request_stop(job["id"], StopRequest.CANCEL)
    state_db.add_event(job["id"], "cancel_requested", "cancel requested by the user")
    if not controller_alive(job, state_db):
        _cancel_orphan(state_db, job)
    return status(job["id"])


def _cancel_orphan(state_db: StateDB, job: JobRecord) -> None:
    """No controller: stop a still-running attempt directly, then mark the job cancelled."""
    from spotfit.backends.base import make_backend
    from spotfit.spec.job import spec_of

    backend = make_backend(raw_spec_of(job).get("backend", "local"))
    for a in state_db.attempts(job["id"]):
        if AttemptState(a["state"]).is_live() and a["handle"]:
            backend.stop(backend.load_handle(a["handle"]))
            state_db.update_attempt(job["id"], a["number"], state=AttemptState.STOPPED, ended_at=time.time())
    state_db.move_job(job["id"], JobState.CANCELLED, "cancelled by the user (no live controller)")
    job_secrets.release(backend, state_db, job["id"], spec_of(job),
                        JobState.CANCELLED)


def wait(ref: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> dict[str, Any]:
    """Block until the job reaches a terminal state (for scripts and tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        doc = status(ref)
        if JobState(doc["state"]).is_terminal():
            return doc
        time.sleep(poll_s)
    raise TimeoutError(f"job {ref} still {status(ref)['state']} after {timeout_s:.0f}s")
