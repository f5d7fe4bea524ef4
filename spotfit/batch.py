"""Batch submission: many job specs queued with a concurrency limit (`spotfit submit`).

`submit(paths, parallel)` validates every spec first (one bad file records nothing), records
one pending job per spec and the batch (in `$SPOTFIT_HOME/sweeps.db`), then the queue
(`run_queue`, in a detached process unless asked to wait) starts each job's controller as a
slot frees, at most `parallel` at once. A folder stands for the `*.yaml` / `*.yml` files in it.
The default limit is one job per GPU of this machine (`nvidia-smi -L`), 1 on a CPU machine.

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

from spotfit import arguments, sdk
from spotfit.errors import UsageError
from spotfit.home import home
from spotfit.states import JobState


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


def submit(paths: list[str], parallel: int | None = None) -> dict:
    """Validate and record the batch's jobs; {id, parallel, jobs} (the queue is started apart)."""
    from spotfit.spec import load_spec
    from spotfit.sweep.runner import db

    if parallel is not None:
        arguments.number("--parallel", parallel, low=1, high=1024,
                         hint="Leave --parallel out for one job per GPU (1 on a CPU machine).")
    files = expand(paths)
    specs = [load_spec(p) for p in files]  # every file is checked before anything is recorded
    batch_id = f"batch-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    job_ids = [sdk.submit_spec(spec) for spec in specs]
    db().add_batch(batch_id, job_ids)
    return {"id": batch_id, "parallel": parallel or default_parallel(), "jobs": job_ids}


def run_queue(batch_id: str, parallel: int, poll_s: float = 0.5) -> list[dict]:
    """Start the batch's pending jobs, at most `parallel` running at once, until all have ended."""
    from spotfit.sweep.runner import db

    job_ids = db().batch(batch_id)
    started: set[str] = set()  # jobs this queue started (their controllers may not have claimed them yet)
    while True:
        jobs = [sdk.db().get_job(j) for j in job_ids]
        live = [j for j in jobs if not JobState(j["state"]).is_terminal()]
        busy = sum(j["id"] in started or j["controller_pid"] is not None for j in live)
        waiting = [j for j in live if j["state"] == JobState.PENDING and j["controller_pid"] is None
                   and j["id"] not in started]
        for job in waiting[:max(0, parallel - busy)]:
            started.add(job["id"])
            sdk.start_detached(job["id"])
        if all(JobState(j["state"]).is_terminal() for j in jobs):
            return [sdk.status(j) for j in job_ids]
        time.sleep(poll_s)


def start_queue(batch_id: str, parallel: int) -> int:
    """Run the queue in a detached process (`python -m spotfit.batch BATCH PARALLEL`); its pid."""
    log = home() / "logs" / batch_id / "queue.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "spotfit.batch", batch_id, str(parallel)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ})
    return proc.pid


if __name__ == "__main__":
    run_queue(sys.argv[1], int(sys.argv[2]))
