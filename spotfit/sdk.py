"""What the CLI and users call: validate, submit, run, status, logs, cancel, resume, list.

Each function takes plain arguments and returns plain data (dicts that are also the `--json`
documents of the CLI), so scripts can drive spotfit without the CLI.

Example:

>>> import spotfit.sdk as sdk  # doctest: +SKIP
>>> job_id = sdk.submit("examples/digits/spotfit.yaml")  # doctest: +SKIP
>>> sdk.run_job(job_id)["state"]  # doctest: +SKIP
'completed'
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from typing import Callable

from spotfit.errors import NotFoundError, UsageError
from spotfit.home import default_store_url, home
from spotfit.spec import JobSpec, Preemption, load_spec
from spotfit.state import StateDB, _alive
from spotfit.states import AttemptState, JobState
from spotfit.stores import child, open_store


def db() -> StateDB:
    return StateDB(home() / "state.db")


def validate(path: str) -> JobSpec:
    """Load and validate a job spec; raises `SpecError` with one clear line."""
    return load_spec(path)


def parse_preempt_at(text: str) -> list[Preemption]:
    """`"40:5,80"` -> preemptions at step 40 (5 s notice) and 80 (default notice)."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        step, _, notice = part.partition(":")
        try:
            out.append(Preemption(at_step=int(step), **({"notice_s": float(notice)} if notice else {})))
        except (ValueError, TypeError) as exc:
            raise UsageError(
                f"Invalid --preempt-at: received {part!r}, expected STEP[:NOTICE_S] with STEP >= 1 "
                "and NOTICE_S >= 0.",
                hint="Example: --preempt-at 40:5,80:0 (SIGTERM at step 40 with 5 s notice; SIGKILL at 80).",
            ) from exc
    return out


def submit(path: str, preempt_at: str | None = None, backend: str | None = None) -> str:
    """Validate the spec and record a new pending job; returns its id.

    `backend` overrides the spec's `backend:` for this job (`spotfit run --backend`).
    """
    from spotfit.backends.base import registered_backends

    spec = load_spec(path)
    chosen = backend or spec.backend
    if chosen not in registered_backends():
        raise UsageError(
            f"Invalid backend: received {chosen!r}, expected one of {', '.join(registered_backends())}.",
            hint="Use --backend local (the embedded default) or --backend aws.",
        )
    spec.backend = chosen
    if preempt_at:
        spec.market.preemptions = [*spec.market.preemptions, *parse_preempt_at(preempt_at)]
    job_id = f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    store_url = child(spec.checkpoint.store or default_store_url(), "jobs", job_id)
    open_store(store_url).write_bytes("spec.json", spec.model_dump_json(indent=2).encode())
    doc = {**spec.model_dump(mode="json"), "base_dir": spec.base_dir}
    db().create_job(job_id, spec.name, json.dumps(doc), store_url)
    return job_id


def run_job(job_id: str, on_update: Callable[[], None] | None = None) -> dict:
    """Drive a submitted job to its end in this process; returns its status document."""
    from spotfit.controller.loop import Controller

    Controller(db(), job_id, on_update=on_update).run()
    return status(job_id)


def start_detached(job_id: str) -> int:
    """Start the job's controller as a detached process (survives this shell); returns its pid."""
    log = home() / "logs" / job_id / "controller.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "spotfit.controller", job_id],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ},
        )
    return proc.pid


def resume(ref: str, detach: bool = False, on_update: Callable[[], None] | None = None) -> dict:
    """Give a job whose controller died a new one: it adopts or relaunches the attempt."""
    job = db().find_job(ref)
    if not JobState(job["state"]).is_resumable():
        raise UsageError(
            f"Job {job['id']} is {job['state']}: only pending, running, waiting, paused or stopped jobs resume.",
            hint="Start a new run with `spotfit run JOB.yaml`.",
        )
    if controller_alive(job):
        raise UsageError(
            f"Job {job['id']} already has a live controller (pid {job['controller_pid']}).",
            hint=f"Watch it with `spotfit status {job['id']}`.",
        )
    if job["state"] == JobState.STOPPED:  # stopped by a rule: it goes on from its checkpoint
        db().update_job(job["id"], state=JobState.PAUSED, message="resuming a stopped job")
    if detach:
        start_detached(job["id"])
        return status(job["id"])
    return run_job(job["id"], on_update)


def controller_alive(job: dict) -> bool:
    pid = job.get("controller_pid")
    return bool(pid) and _alive(pid) and time.time() - (job.get("controller_seen_at") or 0) < 15.0


def status(ref: str) -> dict:
    """The status document of a job (also `spotfit status --json`)."""
    state_db = db()
    job = state_db.find_job(ref)
    attempts = state_db.attempts(job["id"])
    result = json.loads(job["result_json"]) if job["result_json"] else {}
    running_cost = 0.0
    rows = []
    for a in attempts:
        rows.append({
            "number": a["number"], "state": a["state"], "market": a["market"], "zone": a["zone"],
            "start_step": a["start_step"], "end_step": a["end_step"], "exit_code": a["exit_code"],
            "trace_start_s": a["trace_start_s"], "trace_end_s": a["trace_end_s"],
            "billed_s": a["billed_s"], "cost_usd": a["cost_usd"],
        })
        running_cost += a["cost_usd"] or 0.0
    active = not JobState(job["state"]).is_terminal()
    return {
        "id": job["id"],
        "name": job["name"],
        "state": job["state"],
        "message": job["message"],
        "step": job["step"],
        "total_steps": job["total_steps"],
        "loss": job["loss"],
        "attempts": rows,
        "cost_usd": round(running_cost, 6),
        "weights_sha256": result.get("weights_sha256"),
        "metrics": result.get("metrics") or {},
        "store": job["store_url"],
        "controller": ("alive" if controller_alive(job) else "gone") if active else "finished",
        "created_at": job["created_at"],
    }


def list_jobs(limit: int = 50) -> list[dict]:
    return [
        {"id": j["id"], "name": j["name"], "state": j["state"], "step": j["step"],
         "total_steps": j["total_steps"], "created_at": j["created_at"]}
        for j in db().list_jobs(limit)
    ]


def events(ref: str, after_id: int = 0) -> list[dict]:
    job = db().find_job(ref)
    return db().events(job["id"], after_id)


def logs(ref: str, attempt: int | None = None) -> dict:
    """The job's attempt logs (the last attempt's, or `attempt`'s) and its events."""
    job = db().find_job(ref)
    attempts = db().attempts(job["id"])
    if not attempts:
        return {"id": job["id"], "attempt": None, "log": "", "events": events(job["id"])}
    number = attempt or attempts[-1]["number"]
    if number not in {a["number"] for a in attempts}:
        raise NotFoundError(
            f"Job {job['id']} has no attempt {number}: expected one of 1..{len(attempts)}.",
            hint="Leave --attempt out for the latest attempt.",
        )
    key = f"logs/attempt-{number:04d}.log"
    store = open_store(job["store_url"])
    try:
        text = store.read_bytes(key).decode(errors="replace")
    except NotFoundError:
        local = home() / "logs" / job["id"] / key
        text = local.read_text(errors="replace") if local.exists() else ""
    return {"id": job["id"], "attempt": number, "log": text, "events": events(job["id"])}


def cancel(ref: str) -> dict:
    """Ask the job to stop: its controller saves a checkpoint and stops the attempt."""
    state_db = db()
    job = state_db.find_job(ref)
    if JobState(job["state"]).is_terminal():
        return status(job["id"])
    state_db.update_job(job["id"], cancel_requested=1)
    state_db.add_event(job["id"], "cancel_requested", "cancel requested by the user")
    if not controller_alive(job):
        _cancel_orphan(state_db, job)
    return status(job["id"])


def _cancel_orphan(state_db: StateDB, job: dict) -> None:
    """No controller: stop a still-running attempt directly, then mark the job cancelled."""
    from spotfit.backends.base import make_backend

    backend = make_backend(json.loads(job["spec_json"]).get("backend", "local"))
    for a in state_db.attempts(job["id"]):
        if AttemptState(a["state"]).is_live() and a["handle"]:
            backend.stop(backend.load_handle(a["handle"]))
            state_db.update_attempt(job["id"], a["number"], state=AttemptState.STOPPED, ended_at=time.time())
    state_db.update_job(job["id"], state=JobState.CANCELLED, message="cancelled by the user (no live controller)")


def wait(ref: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> dict:
    """Block until the job reaches a terminal state (for scripts and tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        doc = status(ref)
        if JobState(doc["state"]).is_terminal():
            return doc
        time.sleep(poll_s)
    raise TimeoutError(f"job {ref} still {status(ref)['state']} after {timeout_s:.0f}s")


def cost(ref: str | None = None) -> dict:
    """The job's cost ledger (the latest job when `ref` is None): rows, totals, savings, waste."""
    from spotfit.controller.ledger import ledger

    state_db = db()
    if ref is None:
        jobs = state_db.list_jobs(1)
        if not jobs:
            raise NotFoundError("No jobs yet: nothing to account for.", hint="Run one with `spotfit run JOB.yaml`.")
        ref = jobs[0]["id"]
    job = state_db.find_job(ref)
    doc = ledger(state_db.attempts(job["id"]), job["total_steps"])
    return {"id": job["id"], "name": job["name"], "state": job["state"], **doc}
