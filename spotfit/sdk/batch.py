"""Batch submission: many job specs queued with a concurrency limit (`spotfit submit`).

`submit(paths, parallel)` validates every spec first (one bad file records nothing), records
one `queued` job per spec (no controller takes a queued job) and the batch (in the sweep DB,
`sweep/store.py`), then the queue (`run_queue`, in a detached process unless asked to wait)
releases a job (`pending`) as a slot frees, at most `parallel` at once: on a local state it
starts the job's controller itself, on a shared one (`SPOTFIT_STATE_URL`) the long-running
`spotfit controller`s take the pending job. A folder stands for the `*.yaml` / `*.yml` files
in it. The default limit is one job per GPU of this machine (`nvidia-smi -L`), 1 on a CPU machine.

The queue keeps nothing in memory that a crash would lose: the job's state says whether it was
released, the batch's rows record each hand-over (`started_at`, the controller's pid where this
queue started one), and the queue holds the batch's lease (`spotfit/state/lease.py`). Killed at any
point, it is replaced by `resume(batch_id)` (`spotfit batch resume BATCH`), which releases only
jobs still queued, and starts a controller again only for a released job whose controller died
(or never started) before taking the job's lease; a job's lease lets one controller drive it,
so no job runs twice.

Example:

>>> expand([])
Traceback (most recent call last):
...
spotfit.errors.UsageError: Nothing to submit: received no job spec, expected YAML files or folders of them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotfit import sdk
from spotfit.core import arguments
from spotfit.errors import UsageError
from spotfit.host.home import home, state_is_shared
from spotfit.state import lease
from spotfit.state.records import JobRecord
from spotfit.state.states import JobState

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec
    from spotfit.state.db import StateDB
    from spotfit.sweep.store import SweepDB


def default_parallel() -> int:
    """One job per GPU (as `nvidia-smi -L` lists them), or 1 without GPUs."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 1
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 1
    return max(1, sum(line.startswith("GPU ") for line in out.splitlines()))


def expand(paths: list[str]) -> list[Path]:
    """The spec files named: files as given, folders as their YAML files (sorted)."""
    out: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
            if not found:
                raise UsageError(f"Folder {text} holds no job spec: expected *.yaml or *.yml files in it.",
                                 hint="Pass the spec files, or a folder that holds them.")
            out.extend(found)
        else:
            out.append(path)
    if not out:
        raise UsageError("Nothing to submit: received no job spec, expected YAML files or folders of them.",
                         hint="Example: spotfit submit a.yaml b.yaml, or spotfit submit specs/.")
    return out


def submit(paths: list[str], parallel: int | None = None, allow_duplicate: bool = False) -> dict[str, Any]:
    """Validate and record the batch's jobs; {id, parallel, jobs} (the queue is started apart).

    Unless `allow_duplicate`, the batch's job names differ from each other and from every live job.
    """
    from spotfit.sweep.runner import db

    if parallel is not None:
        arguments.number("--parallel", parallel, low=1, high=1024,
                         hint="Leave --parallel out for one job per GPU (1 on a CPU machine).")
    files = expand(paths)
    specs = [sdk.validate(str(p)) for p in files]  # every file and script is checked before anything is recorded
    if not allow_duplicate:
        _unique_names(specs, files)
    batch_id = f"batch-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    job_ids = [sdk.submit_spec(spec, state=JobState.QUEUED, allow_duplicate=allow_duplicate) for spec in specs]
    parallel = parallel or default_parallel()
    db().add_batch(batch_id, job_ids, parallel)
    return {"id": batch_id, "parallel": parallel, "jobs": job_ids}


def _unique_names(specs: list[JobSpec], files: list[Path]) -> None:
    """No two of the batch's jobs share a name, and none has the name of a live job (else `UsageError`)."""
    seen: dict[str, Path] = {}
    for spec, path in zip(specs, files, strict=True):
        if spec.name in seen:
            raise UsageError(f"Two specs of the batch name their job {spec.name!r}: {seen[spec.name]} and {path}.",
                             hint="Give each job its own `name:`, or pass --allow-duplicate.")
        seen[spec.name] = path
        if (live := sdk.db().live_job_named(spec.name)) is not None:
            raise sdk.duplicate_error(spec.name, live)


def run_queue(batch_id: str, poll_s: float = 0.5) -> list[dict[str, Any]]:
    """Start the batch's queued jobs, at most its `parallel` running at once, until all have ended."""
    from spotfit.sweep.runner import db

    sweeps, holder, ttl_s = db(), lease.this_process(), lease.ttl_s()
    if not sweeps.claim_lease("batches", batch_id, holder, ttl_s):
        raise UsageError(f"Batch {batch_id} already has a live queue ({sweeps.get_batch(batch_id)['lease_owner']}: "
                         "host/pid/token).", hint="Watch its jobs with `spotfit list`.")
    try:
        parallel = int(sweeps.get_batch(batch_id)["parallel"])
        while True:
            sweeps.renew_lease("batches", batch_id, holder, ttl_s)  # LeaseLost: another queue drives it
            if _pass(sweeps, batch_id, parallel):
                sweeps.update_batch(batch_id, state="completed")
                return [sdk.status(r["job_id"]) for r in sweeps.batch_jobs(batch_id)]
            time.sleep(poll_s)
    finally:
        sweeps.release_lease("batches", batch_id, holder)


def _pass(sweeps: SweepDB, batch_id: str, parallel: int) -> bool:
    """One look at the batch: release queued jobs while slots are free; True once all ended."""
    state_db, shared = sdk.db(), state_is_shared()
    rows = [(r, state_db.get_job(r["job_id"])) for r in sweeps.batch_jobs(batch_id)]
    live = [(r, j) for r, j in rows if not JobState(j["state"]).is_terminal()]
    if not live:
        return True
    # Released, a job holds a slot until it ends (paused by a rule included: `spotfit resume` continues it).
    busy = [(r, j) for r, j in live if j["state"] != JobState.QUEUED]
    queued = [j for r, j in live if j["state"] == JobState.QUEUED]
    for row, job in busy:
        if _lost_before_its_lease(row, job, shared):
            _start_controller(sweeps, batch_id, job["id"])
    for job in queued[:max(0, parallel - len(busy))]:
        _release(sweeps, state_db, batch_id, job["id"], shared)
    return False


def _lost_before_its_lease(row: dict[str, Any], job: JobRecord, shared: bool) -> bool:
    """Whether a released job's controller died (or was never started) before taking the job's lease:
    nothing of the job ran, so this queue starts one again. On a shared state the long-running
    controllers take a pending job: there is nothing to start."""
    if shared or job["state"] != JobState.PENDING or job["lease_owner"] is not None:
        return False  # a controller took it: one that died since is `spotfit resume`'s, as for any job
    pid = row["controller_pid"]  # None: the queue died between releasing the job and starting its controller
    return pid is None or not lease.pid_alive(pid)


def _release(sweeps: SweepDB, state_db: StateDB, batch_id: str, job_id: str, shared: bool) -> None:
    """Queued -> pending, with the hand-over's record; on a local state, start its controller too.

    On PostgreSQL the two are one transaction. Beside SQLite files (two of them) the record comes
    first: a queue that dies before the job is pending leaves it queued, released again later.
    """
    message = f"released by its batch {batch_id}: a slot is free"
    if sweeps.dialect == "postgresql":
        released = sweeps.release_queued(batch_id, job_id, message)
    else:
        sweeps.batch_job_started(batch_id, job_id, None)
        released = state_db.release_queued(job_id, message)
    if released and not shared:
        _start_controller(sweeps, batch_id, job_id)


def _start_controller(sweeps: SweepDB, batch_id: str, job_id: str) -> None:
    sweeps.batch_job_started(batch_id, job_id, sdk.start_detached(job_id))


def start_queue(batch_id: str) -> int:
    """Run the queue in a detached process (`python -m spotfit.sdk.batch BATCH`); its pid."""
    log = home() / "logs" / batch_id / "queue.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "spotfit.sdk.batch", batch_id],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ})
    return proc.pid


def resume(batch_id: str, detach: bool = False) -> dict[str, Any]:
    """Give a batch whose queue died a new one; {id, parallel, jobs: [{id, state}]} (with `detach`: as they are now)."""
    from spotfit.sweep.runner import db

    sweeps = db()
    batch = sweeps.get_batch(batch_id)
    if sweeps.lease_live(batch):
        raise UsageError(f"Batch {batch_id} already has a live queue ({batch['lease_owner']}: host/pid/token).",
                         hint="Watch its jobs with `spotfit list`.")
    if detach:
        start_queue(batch_id)
        statuses = [sdk.status(j) for j in sweeps.batch(batch_id)]
    else:
        statuses = run_queue(batch_id)
    return {"id": batch_id, "parallel": batch["parallel"],
            "jobs": [{"id": s["id"], "state": s["state"]} for s in statuses]}


if __name__ == "__main__":
    run_queue(sys.argv[1])
