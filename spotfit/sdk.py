"""What the CLI and scripts call: one function per verb, returning plain data.

Jobs: validate, submit, run_job, status, logs, cancel, resume, list_jobs, cost. Market and
tools: plan, catalog, simulate, dry_run, gc, doctor, tensorboard, ui (the web dashboard).
Interactive work (notebooks, ssh, port-forward) is in `spotfit.interactive`.

Each function takes plain arguments and returns plain data (dicts that are also the `--json`
documents of the CLI), so scripts can drive spotfit without the CLI; the CLI calls nothing else.

A job runs with `sdk.run_job(sdk.submit("examples/digits/spotfit.yaml"))` (it trains, so it is
not a docstring example). Example:

>>> import spotfit.sdk as sdk
>>> offer = sdk.catalog(accelerator="V100", count=1, cloud="aws", spot=True)["offers"][0]
>>> offer["instance_type"], offer["spot_usd_per_h"] < offer["on_demand_usd_per_h"]
('p3.2xlarge', True)
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, cast

from spotfit import arguments, job_secrets, scriptcheck
from spotfit.errors import BackendError, NotFoundError, SpotfitError, UsageError
from spotfit.home import default_store_url, home, state_is_shared, state_target
from spotfit.state import StateDB
from spotfit.states import AttemptState, JobState, StopRequest

if TYPE_CHECKING:  # the spec (pydantic) and the stores (fsspec) load on first use: `status` needs neither
    from spotfit.spec import BackendName, JobSpec, Preemption
    from spotfit.stores.base import ObjectStore


_READING: ContextVar[StateDB | None] = ContextVar("spotfit_state_db", default=None)


def db() -> StateDB:
    """The state DB: the one `reading_from` set for this context, else `$SPOTFIT_STATE_URL` (a team's
    PostgreSQL, a file on a volume), else the home's."""
    chosen = _READING.get()
    return chosen if chosen is not None else StateDB(state_target())
@contextmanager
def reading_from(state_db: StateDB) -> Iterator[StateDB]:
    """Answer the verbs called in this block from `state_db` (the dashboard's read-only connection)."""
    token = _READING.set(state_db)
    try:
        yield state_db
    finally:
        _READING.reset(token)


def _find(state_db: StateDB, ref: str | None) -> dict:
    """The job `ref` (an id, id prefix or name) names; the newest job when `ref` is None."""
    if ref is not None:
        return state_db.find_job(arguments.job_ref(ref))
    jobs = state_db.list_jobs(1)
    if not jobs:
        raise NotFoundError("No jobs yet: nothing to show.", hint="Run one with `spotfit run JOB.yaml`.")
    return jobs[0]


def validate(path: str) -> JobSpec:
    """Load and validate a job spec; raises `SpecError` with one clear line."""
    from spotfit.spec import load_spec

    return load_spec(path)


_PREEMPTION = re.compile(r"(\d+)(?::(\d+(?:\.\d*)?|\.\d+))?", re.ASCII)  # STEP[:NOTICE_S], ASCII digits


def parse_preempt_at(text: str) -> list[Preemption]:
    """`"40:5,80"` -> preemptions at step 40 (5 s notice) and 80 (default notice)."""
    from spotfit.spec import Preemption

    out = []
    for part in [p for p in (p.strip() for p in text.split(",")) if p] or [text]:
        match = _PREEMPTION.fullmatch(part)
        try:
            if match is None:
                raise ValueError(part)
            step, notice = match.groups()
            out.append(Preemption(at_step=int(step), **({"notice_s": float(notice)} if notice else {})))
        except ValueError as exc:  # pydantic's ValidationError is one too
            raise UsageError(
                f"Invalid --preempt-at: received {part[:80]!r}, expected STEP[:NOTICE_S] with STEP >= 1 "
                "and NOTICE_S >= 0, comma-separated.",
                hint="Example: --preempt-at 40:5,80:0 (SIGTERM at step 40 with 5 s notice; SIGKILL at 80).",
            ) from exc
    return out


def submit(path: str, preempt_at: str | None = None, backend: str | None = None) -> str:
    """Validate the spec and record a new pending job; returns its id.

    `backend` overrides the spec's `backend:` for this job (`spotfit run --backend`).
    """
    from spotfit.spec import load_spec

    return submit_spec(load_spec(path), preempt_at=preempt_at, backend=backend)


def submit_spec(spec: JobSpec, preempt_at: str | None = None, backend: str | None = None,
                before_record: Callable[[str, ObjectStore], None] | None = None) -> str:
    """Record a new pending job for a validated spec; returns its id (`submit` reads the file).

    `before_record(job_id, store)` writes what the job needs in its store before the job is
    recorded (a notebook's token and seed files), so no controller sees it without them.
    """
    from spotfit.backends.base import registered_backends
    from spotfit.stores import child, open_store

    chosen = spec.backend if backend is None else backend
    if chosen not in registered_backends():
        raise UsageError(
            f"Invalid backend: received {chosen!r}, expected one of {', '.join(registered_backends())}.",
            hint="Use --backend local (the embedded default), aws or kubernetes.",
        )
    spec.backend = cast("BackendName", chosen)  # checked against the registry above
    notes = _backend_preflight(spec)
    if preempt_at is not None:
        spec.market.preemptions = [*spec.market.preemptions, *parse_preempt_at(preempt_at)]
    values = job_secrets.read_from_shell(spec.secrets)  # before anything is recorded
    job_id = f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    store_url = child(spec.checkpoint.store or default_store_url(), "jobs", job_id)
    store = open_store(store_url)
    job_secrets.store_at_submit(chosen, job_id, spec, values, store)
    store.write_bytes("spec.json", spec.model_dump_json(indent=2).encode())
    if state_is_shared() and not spec.is_notebook:  # the script's folder goes to the controller, wherever it runs
        from spotfit.controller import shipped_code

        shipped_code.ship(spec, store)
    if before_record is not None:
        before_record(job_id, store)
    doc = {**spec.model_dump(mode="json"), "base_dir": spec.base_dir}
    db().create_job(job_id, spec.name, json.dumps(doc), store_url)
    warning = None if spec.is_notebook else scriptcheck.warning_for(spec.script_path)
    if warning is not None:
        db().add_event(job_id, "nothing_checkpointed", warning)
    for note in notes:
        db().add_event(job_id, "backend_note", note)
    return job_id


def _backend_preflight(spec: JobSpec) -> list[str]:
    """The backend's checks before anything is recorded (kubeconfig, context, TFJob CRD); its notes."""
    from spotfit.backends.base import make_backend

    check = getattr(make_backend(spec.backend), "preflight", None)
    return check(spec) if check is not None else []


def run_job(job_id: str, on_update: Callable[[], None] | None = None) -> dict:
    """Drive a submitted job to its end in this process; returns its status document."""
    from spotfit.controller.loop import Controller

    Controller(db(), job_id, on_update=on_update).run()
    return status(job_id)


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


def serve_controller(scan_s: float = 2.0, poll_s: float = 1.0, max_jobs: int = 32,
                     log: Callable[[str], None] = print) -> None:
    """Run a long-running controller on this state until the process ends (`spotfit controller`)."""
    from spotfit.controller.service import Service

    arguments.number("--scan-s", scan_s, low=0, high=3600, low_open=True, hint="Pass --scan-s 2.")
    arguments.number("--poll-s", poll_s, low=0, high=60, low_open=True, hint="Pass --poll-s 1.")
    arguments.number("--max-jobs", max_jobs, low=1, high=10_000, hint="Pass --max-jobs 32.")
    Service(state_target(), scan_s=scan_s, poll_s=poll_s, max_jobs=max_jobs, log=log).run()


def resume(ref: str, detach: bool = False, on_update: Callable[[], None] | None = None) -> dict:
    """Give a job whose controller died a new one: it adopts or relaunches the attempt."""
    job = _find(db(), ref)
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
    if job["state"] == JobState.STOPPED:  # stopped by a rule or pruned: it goes on from its checkpoint
        db().update_job(job["id"], state=JobState.PAUSED, cancel_requested=StopRequest.NONE,
                        message="resuming a stopped job")
    if detach and state_is_shared() and job["state"] in (JobState.PAUSED, JobState.STOPPED):
        # The long-running controllers pick up waiting jobs, not paused ones.
        db().update_job(job["id"], state=JobState.WAITING, message="resumed")
        db().add_event(job["id"], "resumed", "paused job resumed")
    if detach:
        start_detached(job["id"])
        return status(job["id"])
    return run_job(job["id"], on_update)


def controller_alive(job: dict, state_db: StateDB | None = None) -> bool:
    """Whether a controller holds the job's lease now (on this host: its process is alive)."""
    return (state_db or db()).lease_live(job)


def live_controllers(within_s: float = 60.0) -> list[dict]:
    """The long-running `spotfit controller`s seen on this state in the last `within_s` seconds."""
    return db().live_controllers(within_s)


def status(ref: str) -> dict:
    """The status document of a job (also `spotfit status --json`)."""
    state_db = db()
    job = _find(state_db, ref)
    attempts = state_db.attempts(job["id"])
    result = json.loads(job["result_json"]) if job["result_json"] else {}
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
        "store": job["store_url"],
        "controller": controller,
        "paused": paused,
        "store_problem": _store_problem(state_db, job["id"]) if active else None,
        "created_at": job["created_at"],
    }


def _paused(state_db: StateDB, job: dict) -> dict | None:
    """For a paused job: the rule that paused it, why, and how to resume it."""
    if job["state"] != JobState.PAUSED:
        return None
    last = state_db.last_event(job["id"], ("rule", "budget_limit"))
    if last is not None and last["data"].get("action") != "pause":
        last = None
    rule = last["data"].get("rule", "budget") if last else None
    # A rule event reads "RULE: WHY -> pause (saves ~$X)": the reason is WHY.
    reason = last["message"].split(": ", 1)[-1].rsplit(" -> ", 1)[0] if last else job["message"]
    resume = None if controller_alive(job, state_db) else f"spotfit resume {job['id']}"
    return {"rule": rule, "reason": reason, "resume": resume}


def _store_problem(state_db: StateDB, job_id: str) -> str | None:
    """The store outage or full disk the controller last reported, while it lasts."""
    from spotfit.controller.store_guard import STORE_EVENTS

    last = state_db.last_event(job_id, STORE_EVENTS)
    return None if last is None or last["kind"] == "store_back" else last["message"]


def list_jobs(limit: int = 50) -> list[dict]:
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


def events(ref: str, after_id: int = 0) -> list[dict]:
    job = _find(db(), ref)
    return db().events(job["id"], after_id)


def logs(ref: str, attempt: int | None = None) -> dict:
    """The job's attempt logs (the last attempt's, or `attempt`'s) and its events."""
    from spotfit.stores import open_store

    if attempt is not None:
        arguments.number("--attempt", attempt, low=1, high=1_000_000,
                         hint="Leave --attempt out for the latest attempt.")
    job = _find(db(), ref)
    attempts = db().attempts(job["id"])
    if not attempts:
        return {"id": job["id"], "attempt": None, "log": "", "events": events(job["id"]), "boot_log_tail": ""}
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
    try:  # an instance's boot (install, agent) log, uploaded by the instance when it powers off
        boot = store.read_bytes(boot_log_key(number)).decode(errors="replace")
    except NotFoundError:
        boot = ""
    return {"id": job["id"], "attempt": number, "log": text, "events": events(job["id"]),
            "boot_log_tail": "\n".join(boot.splitlines()[-BOOT_LOG_LINES:])}


BOOT_LOG_LINES = 40


def boot_log_key(attempt: int) -> str:
    """Where an instance uploads its boot log (user-data and agent output) in the job's store."""
    return f"logs/attempt-{attempt:04d}.boot.log"


def cancel(ref: str) -> dict:
    """Ask the job to stop: its controller saves a checkpoint and stops the attempt."""
    state_db = db()
    job = _find(state_db, ref)
    if JobState(job["state"]).is_terminal():
        return status(job["id"])
    state_db.update_job(job["id"], cancel_requested=StopRequest.CANCEL)
    state_db.add_event(job["id"], "cancel_requested", "cancel requested by the user")
    if not controller_alive(job, state_db):
        _cancel_orphan(state_db, job)
    return status(job["id"])


def _cancel_orphan(state_db: StateDB, job: dict) -> None:
    """No controller: stop a still-running attempt directly, then mark the job cancelled."""
    from spotfit.backends.base import make_backend
    from spotfit.spec import JobSpec

    backend = make_backend(json.loads(job["spec_json"]).get("backend", "local"))
    for a in state_db.attempts(job["id"]):
        if AttemptState(a["state"]).is_live() and a["handle"]:
            backend.stop(backend.load_handle(a["handle"]))
            state_db.update_attempt(job["id"], a["number"], state=AttemptState.STOPPED, ended_at=time.time())
    state_db.update_job(job["id"], state=JobState.CANCELLED, message="cancelled by the user (no live controller)")
    job_secrets.release(backend, state_db, job["id"], JobSpec.model_validate(json.loads(job["spec_json"])),
                        JobState.CANCELLED)


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
    """The job's cost ledger (the latest job when `ref` is None): rows, totals, savings, waste, regret.

    `totals` also holds, for the job's own market window, the hindsight optimum (`optimum_usd`),
    what every online policy would have paid (`policies`) and `regret` (spent ÷ optimum);
    `hindsight` gives that window, or a `note` saying why a job has none.
    """
    from spotfit.controller.hindsight import hindsight
    from spotfit.controller.ledger import ledger
    from spotfit.market.policies.base import ALIASES
    from spotfit.spec import JobSpec

    state_db = db()
    job = _find(state_db, ref)
    attempts = state_db.attempts(job["id"])
    doc = ledger(attempts, job["total_steps"])
    totals = doc["totals"]
    origin_s = job["trace_origin_s"] if job["trace_origin_s"] is not None else next(
        (a["trace_start_s"] for a in attempts if a["trace_start_s"] is not None), None)
    try:
        spec: JobSpec | None = JobSpec.model_validate(json.loads(job["spec_json"]))
    except ValueError:  # recorded by a spotfit whose spec differs: the ledger stands without hindsight
        spec = None
    seen = hindsight(spec, origin_s, totals["work_done_s"], totals["spent_usd"])
    totals.update(optimum_usd=seen["optimum_usd"], policies=seen["policies"], regret=seen["regret"])
    policy = ALIASES.get(spec.market.policy, spec.market.policy) if spec else None
    return {"id": job["id"], "name": job["name"], "state": job["state"], "policy": policy, **doc,
            "hindsight": {"window": seen["window"], "note": seen["note"]}}


# market and tools ---------------------------------------------------------------------------


MAX_STARTS = 1_000  # start ticks of `simulate`: beyond this the replays take hours and say nothing new


def plan(path: str, trace: str | None = None, all_clouds: bool = False) -> dict:
    """Rank where to run the job spec at `path`: expected cost, preemptions, finish (`spotfit plan`).

    `trace` replaces the spec's `market.trace` (a bundled name or a file in any format
    `load_trace` reads); it must record the job's accelerator. `all_clouds` lets the
    recommendation go to a cloud spotfit cannot launch on.
    """
    from spotfit.market import offers
    from spotfit.market.trace import load_trace
    from spotfit.spec import load_spec

    spec = load_spec(path, check_script=False)
    res, market = spec.resources, spec.market
    if trace is not None:
        arguments.text("--trace", trace, expected="a trace file or a bundled trace name, e.g. aws-v100",
                       hint="Pass --trace aws-v100 or a path to a trace CSV(.gz).")
    name = trace if trace is not None else market.trace
    history = load_trace(name, gap_s=market.gap_s) if name else None
    return offers.plan(
        accelerator=res.accelerator,
        count=res.count,
        work_h=spec.work_h,
        deadline_h=spec.deadline_h,
        spot=res.spot,
        trace=history,
        zones=list(market.zones or []) or None,
        start=market.start,
        overhead_h=market.overhead_h,
        policy=market.policy,
        all_clouds=all_clouds,
        trace_required=trace is not None,
    ).to_json()


def catalog(accelerator: str | None = None, count: float | None = None, cloud: str | None = None,
            region: str | None = None, spot: bool = False) -> dict:
    """GPU offers of the bundled price catalogs, cheapest first (`spotfit catalog`)."""
    from spotfit.market.catalog import load_catalog

    if count is not None:
        arguments.number("--count", count, low=1, high=16, hint="Pass --count 1 (or 2, 4, 8).")
        if not float(count).is_integer():  # a fraction matches no offer: say so rather than list none
            raise UsageError(f"Invalid `--count`: received {count!r}, expected a whole number of accelerators "
                             "per instance.", hint="Pass --count 1 (or 2, 4, 8).")
    everything = load_catalog()
    accelerators = sorted({o.accelerator for o in everything})
    if accelerator is not None and accelerator.lower() not in {a.lower() for a in accelerators}:
        raise UsageError(f"Invalid `--accelerator`: received {accelerator!r}, expected one the bundled catalogs "
                         f"list: {', '.join(accelerators)}.", hint="Pass --accelerator V100, or leave it out.")
    if region is not None and region not in {o.region for o in everything}:
        raise UsageError(f"Invalid `--region`: received {region!r}, expected a region the bundled catalogs list, "
                         "e.g. us-east-1.", hint="Run `spotfit catalog` without --region to see them all.")
    offers = load_catalog(accelerator=accelerator, count=count, cloud=cloud, region=region, spot=spot)
    return {"offers": [o.to_json() for o in offers]}


def simulate(trace: str = "aws-v100", work_h: float = 48.0, deadline_h: float = 52.0, overhead_h: float = 0.2,
             zones: list[str] | None = None, starts: int = 6, policy: str = "all",
             gap_s: int | None = None) -> dict:
    """Replay a trace: what each policy pays and whether it meets the deadline (`spotfit simulate`)."""
    from spotfit.market.policies.base import DEFAULT_POLICY, POLICIES
    from spotfit.market.simulator import Job, run_grid, summarize
    from spotfit.market.trace import load_trace
    from spotfit.spec import MAX_HOURS

    policy = DEFAULT_POLICY if policy == "default" else policy  # as `market.policy: default` means
    if policy != "all" and policy not in POLICIES:
        raise UsageError(f"Invalid `--policy`: received {policy!r}, expected 'all', 'default' or one of "
                         f"{', '.join(sorted(POLICIES))}.", hint=f"Pass --policy {DEFAULT_POLICY}.")
    for flag, hours, default in (("--work-h", work_h, 48), ("--deadline-h", deadline_h, 52)):
        arguments.number(flag, hours, low=0, high=MAX_HOURS, low_open=True, hint=f"Pass {flag} {default} (hours).")
    arguments.number("--overhead-h", overhead_h, low=0, high=MAX_HOURS, hint="Pass --overhead-h 0.2 (hours).")
    arguments.number("--starts", starts, low=1, high=MAX_STARTS, hint="Pass --starts 6.")
    if gap_s is not None:
        arguments.number("--gap-s", gap_s, low=1, high=86_400, hint="Leave --gap-s out to infer it from the trace.")
    for zone in zones or []:
        arguments.text("--zones", zone, hint="Leave --zones out to use every zone of the trace.",
                       expected="a zone of the trace, e.g. us-east-1a")
    names = list(POLICIES) if policy == "all" else [policy]
    market = load_trace(trace, gap_s=gap_s)
    runs = run_grid(market, Job.from_hours(work_h, deadline_h, overhead_h), names, starts, zones)
    return {"default_policy": DEFAULT_POLICY, "trace": market.source, "runs": [r.to_json() for r in runs],
            "summary": summarize(runs)}


def dry_run(path: str, backend: str | None = None) -> dict:
    """The exact cloud requests of the job's first attempt; nothing is sent or recorded (`run --dry-run`)."""
    chosen = validate(path).backend if backend is None else backend
    if chosen == "kubernetes":
        from spotfit.backends.kubernetes.dryrun import dry_run as plan_objects

        return plan_objects(path)
    if chosen != "aws":  # the backends that send cloud requests
        raise UsageError(f"Invalid --dry-run: received backend {chosen!r}, expected aws or kubernetes (the "
                         "backends that send cloud requests).", hint="Add --backend aws (or kubernetes), or leave "
                                                                     "--dry-run out.")
    from spotfit.backends.aws.dryrun import dry_run as plan_requests

    return plan_requests(path)


def gc(regions: list[str] | None = None, job: str | None = None, dry_run: bool = False,
       include_active: bool = False) -> dict:
    """Find (and unless `dry_run`, remove) the cloud resources spotfit left behind, by tag (`spotfit gc`).

    Resources of jobs still active in this state DB are kept unless `include_active`.
    """
    from spotfit.backends.aws.gc import collect

    for region in regions or []:
        arguments.text("--region", region, pattern=r"[a-z]{2}(-[a-z]+)+-\d{1,2}", expected="an AWS region such "
                       "as us-east-1", hint="Pass --region us-east-1 (repeat it for more regions).")
    if job is not None:
        arguments.text("--job", job, expected="a job id", hint="Leave --job out to clean up after every job.")
    regions = regions or [os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"]
    keep = set() if include_active else {
        j["id"] for j in db().list_jobs(limit=1_000_000) if not JobState(j["state"]).is_terminal()}
    return collect(regions, keep=keep, job=job, dry_run=dry_run)


def market_record(region: str, instance_type: str, zones: list[str] | None = None, trace: str | None = None,
                  hours: float = 24.0, gap_s: int = 300) -> dict:
    """Append `instance_type`'s live market in `region` to a trace file (`spotfit market record`)."""
    from spotfit.backends.aws.client import load_boto3, sdk_failure
    from spotfit.backends.aws.record import observed_outages, record

    arguments.text("--region", region, pattern=r"[a-z]{2}(-[a-z]+)+-\d{1,2}", expected="an AWS region such as "
                   "us-east-1", hint="Pass --region us-east-1.")
    arguments.number("--hours", hours, low=0.1, high=24 * 90, hint="AWS keeps 90 days of spot price history.")
    arguments.number("--gap-s", gap_s, low=60, high=86400, hint="Pass --gap-s 300 (five minutes).")
    path = trace or f"{instance_type}_{region}.csv"
    try:
        ec2 = load_boto3().Session().client("ec2", region_name=region)
        return record(ec2, instance_type, path, zones, observed_outages(db(), region, instance_type), hours, gap_s)
    except SpotfitError:
        raise
    except Exception as exc:
        if (reason := sdk_failure(exc)) is None:
            raise
        raise BackendError(f"Could not read the spot price history of {instance_type} in {region}: {reason}",
                           hint="Check the credentials (`aws sts get-caller-identity`) and the region; the "
                                "controller's IAM policy in docs/aws.md allows ec2:DescribeSpotPriceHistory.") from exc


def doctor(store: str | None = None, registry: str | None = None) -> dict:
    """What this machine can train with, each problem with its fix (`spotfit doctor`; imports TensorFlow)."""
    from spotfit.runtime import doctor as checks

    for flag, url in (("--store", store), ("--registry", registry)):
        if url is not None:
            arguments.text(flag, url, pattern=r"[a-z0-9]+://\S*", expected="a URL such as file:///path or s3://bucket/prefix",
                           hint=f"Leave {flag} out to probe the home's.")
    return checks.run(store, registry)


def tensorboard(ref: str | None, port: int = 6006,
                on_start: Callable[[str, str, object], None] | None = None) -> int:
    """Serve a job's TensorBoard logs on 127.0.0.1:`port` until interrupted; TensorBoard's exit code.

    `on_start(job_id, url, logdir)` is called once the server runs.
    """
    from spotfit import tensorboard_server as tb

    arguments.number("--port", port, low=1, high=65_535, hint="Pass --port 6006.")
    job = _find(db(), ref)
    started = (lambda url, logdir: on_start(job["id"], url, logdir)) if on_start else None
    return tb.serve(job["store_url"], job["id"], port, home() / "cache" / "tensorboard", on_start=started)


def ui(host: str = "127.0.0.1", port: int = 8765, on_start: Callable[[str], None] | None = None) -> None:
    """Serve the dashboard on `host`:`port` until interrupted (`spotfit ui`; port 0 picks a free one).

    `on_start(url)` is called once it listens, with the URL that carries the access token.
    """
    arguments.number("--port", port, low=0, high=65_535, hint="Pass --port 8765.")
    arguments.text("--host", host, pattern=r"[A-Za-z0-9.:\-\[\]]+", expected="an address to bind, e.g. 127.0.0.1",
                   hint="Leave --host out to bind 127.0.0.1, and reach it from elsewhere through an SSH tunnel.")
    try:
        from spotfit.ui.server import serve
    except ImportError as exc:
        raise UsageError(f"The dashboard needs the `ui` extra: {exc.name} is not installed.",
                         hint="pip install 'spotfit[ui]'") from None
    serve(home() / "state.db", host, port, on_start or (lambda url: None))
