"""Reading a job back: its status document, list, events and logs (its costs: `costs.py`)."""

from __future__ import annotations

from typing import Any

from spotfit.attempt import layout
from spotfit.attempt.result import job_result
from spotfit.core import arguments
from spotfit.errors import NotFoundError
from spotfit.host.home import home, state_is_shared
from spotfit.sdk.context import controller_alive, db, find_job
from spotfit.state.db import StateDB
from spotfit.state.records import AttemptRecord, EventRecord, JobRecord
from spotfit.state.states import JobState


def status(ref: str) -> dict[str, Any]:
    """The status document of a job (also `spotfit status --json`)."""
    state_db = db()
    job = find_job(state_db, ref)
    attempts = state_db.attempts(job["id"])
    result = job_result(job["result_json"])
    running_cost = 0.0
    rows = []
    for a in attempts:
        rows.append({
            "number": a["number"], "state": a["state"], "market": a["market"], "zone": a["zone"],
            "start_step": a["start_step"], "end_step": a["end_step"], "exit_code": a["exit_code"],
            "trace_start_s": a["trace_start_s"], "trace_end_s": a["trace_end_s"],
            "billed_s": a["billed_s"], "cost_usd": a["cost_usd"], "failure": a["info"].get("failure"),
        })
        running_cost += a["cost_usd"] or 0.0
    active = not JobState(job["state"]).is_terminal()
    gone = "waiting for one" if state_is_shared() else "gone"  # a shared state's `spotfit controller`s take it
    controller = ("alive" if controller_alive(job, state_db) else gone) if active else "finished"
    paused = _paused(state_db, job)
    if paused is not None and controller == gone:  # a rule's pause ends the controller on purpose
        controller = "none (paused)"
    if job["state"] == JobState.QUEUED:  # no controller until its batch's queue releases it
        controller = "none (queued)"
    # A controller that died (kill -9, a crash, a closed laptop): a new one adopts its attempt exactly.
    resume = f"spotfit resume {job['id']}" if controller == "gone" else None
    return {
        "id": job["id"],
        "name": job["name"],
        "state": job["state"],
        "message": job["message"],
        "step": job["step"],
        "total_steps": job["total_steps"],
        # Until the script ends, a later `fit` call may add steps: the runtime's total is its plan so far.
        "total_steps_estimated": active and job["total_steps"] is not None,
        "loss": job["loss"],
        "attempts": rows,
        "cost_usd": round(running_cost, 6),
        "weights_sha256": result.get("weights_sha256"),
        "metrics": result.get("metrics") or {},
        # {"version", "url"} once published, {"error"} when the export failed, None without an export.
        "export": result.get("export"),
        "offers": result.get("offers") or [],  # speed-ups `auto` measured and did not apply (runtime/offer.py)
        "store": job["store_url"],
        "controller": controller,
        "resume": resume,
        "paused": paused,
        "store_problem": _store_problem(state_db, job["id"]) if active else None,
        "gpu": _gpu(state_db, job["id"], attempts),
        "created_at": job["created_at"],
    }


def _paused(state_db: StateDB, job: JobRecord) -> dict[str, Any] | None:
    """For a paused job: the rule that paused it, why, and how to resume it."""
    if job["state"] != JobState.PAUSED:
        return None
    last = state_db.last_event(job["id"], ("rule", "budget_limit", "store_paused", "team_budget"))
    if last is not None and last["kind"] == "store_paused":
        return {"rule": "store full", "reason": job["message"],
                "resume": None if controller_alive(job, state_db) else f"spotfit resume {job['id']}"}
    if last is not None and last["data"].get("action") != "pause":
        last = None
    rule = last["data"].get("rule", "budget") if last else None
    # A rule event reads "RULE: WHY -> pause (saves ~$X)": the reason is WHY.
    reason = last["message"].split(": ", 1)[-1].rsplit(" -> ", 1)[0] if last else job["message"]
    resume = None if controller_alive(job, state_db) else f"spotfit resume {job['id']}"
    return {"rule": rule, "reason": reason, "resume": resume}


def _gpu(state_db: StateDB, job_id: str, attempts: list[AttemptRecord]) -> dict[str, Any] | None:
    """The last attempt's latest GPU reading (`count` 0 and a `note` when it had no GPU); None before one.

    Utilization and memory are in percent (`util_pct`, `mem_pct`), memory also in GiB, summed
    over the attempt's `count` GPUs; `at` is when it was read.
    """
    if not attempts:
        return None
    last = attempts[-1]
    if last["info"].get("gpu"):
        return {"attempt": last["number"], **last["info"]["gpu"]}
    said = state_db.last_event(job_id, ("no_gpu",))
    if said is not None and said["attempt"] == last["number"]:
        return {"attempt": last["number"], "count": 0, "note": said["message"]}
    return None


def _store_problem(state_db: StateDB, job_id: str) -> str | None:
    """The store outage or full disk the controller last reported, while it lasts."""
    from spotfit.controller.store_guard import STORE_EVENTS

    last = state_db.last_event(job_id, STORE_EVENTS)
    return None if last is None or last["kind"] == "store_back" else last["message"]


def list_jobs(limit: int = 50) -> list[dict[str, Any]]:
    """The newest `limit` jobs, newest first, each with its `group` (sweep or batch id; `spotfit list`)."""
    arguments.number("--limit", limit, low=1, high=1_000_000, hint="Pass --limit 50.")
    from spotfit.sweep.store import open_existing

    sweeps = open_existing()  # `group`: the sweep or batch of the job (spotfit/sweep/store.py)
    groups = {} if sweeps is None else sweeps.group_of()
    return [
        {"id": j["id"], "name": j["name"], "state": j["state"], "step": j["step"],
         "total_steps": j["total_steps"], "created_at": j["created_at"], "group": groups.get(j["id"])}
        for j in db().list_jobs(limit)
    ]


def events(ref: str, after_id: int = 0) -> list[EventRecord]:
    job = find_job(db(), ref)
    return db().events(job["id"], after_id)


def logs(ref: str, attempt: int | None = None) -> dict[str, Any]:
    """The job's attempt logs (the last attempt's, or `attempt`'s) and its events."""
    from spotfit.stores import open_store

    if attempt is not None:
        arguments.number("--attempt", attempt, low=1, high=1_000_000,
                         hint="Leave --attempt out for the latest attempt.")
    job = find_job(db(), ref)
    attempts = db().attempts(job["id"])
    if not attempts:
        return {"id": job["id"], "attempt": None, "log": "", "events": events(job["id"]), "boot_log_tail": ""}
    number = attempt or attempts[-1]["number"]
    if number not in {a["number"] for a in attempts}:
        raise NotFoundError(
            f"Job {job['id']} has no attempt {number}: expected one of 1..{len(attempts)}.",
            hint="Leave --attempt out for the latest attempt.",
        )
    key = layout.log(number)
    store = open_store(job["store_url"])
    try:
        text = store.read_bytes(key).decode(errors="replace")
    except NotFoundError:
        local = home() / "logs" / job["id"] / key
        text = local.read_text(errors="replace") if local.exists() else ""
    try:  # an instance's boot (install, agent) log, uploaded by the instance when it powers off
        boot = store.read_bytes(layout.boot_log(number)).decode(errors="replace")
    except NotFoundError:
        boot = ""
    return {"id": job["id"], "attempt": number, "log": text, "events": events(job["id"]),
            "boot_log_tail": "\n".join(boot.splitlines()[-BOOT_LOG_LINES:])}


BOOT_LOG_LINES = 40


