"""What the CLI calls for sweeps: start, run, resume, status, compare, cancel (plain data back).

A sweep runs with `api.run(api.start("sweep.yaml"))` in this process; `detach` starts its
controller as a detached process instead (`python -m spotfit.sweep SWEEP`).

Example (a bad sweep file is refused before anything is recorded):

>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "train.py").write_text("")
>>> _ = (d / "spotfit.yaml").write_text("{name: digits, script: train.py}")
>>> _ = (d / "sweep.yaml").write_text("{job: spotfit.yaml, params: {lr: {uniform: [0, 1]}}, trials: 0, "
...                                   "objective: {metric: val_accuracy}}")
>>> try:
...     start(str(d / "sweep.yaml"))
... except UsageError as exc:
...     print(exc.message.replace(str(d), "..."))
Invalid `trials` in .../sweep.yaml: received 0, expected: input should be greater than or equal to 1.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from spotfit import sdk
from spotfit.core import arguments
from spotfit.errors import UsageError
from spotfit.host.home import home
from spotfit.sweep import report, study
from spotfit.sweep.runner import FINAL, SweepRunner, controller_alive, db
from spotfit.sweep.spec import load_sweep


def start(path: str, preempt_at: str | None = None, preempt_trial: int = 0) -> str:
    """Validate the sweep file and its job, record the sweep and its study; returns the sweep id.

    `preempt_at` (as `spotfit run --preempt-at`) is injected into trial `preempt_trial`'s job.
    """
    spec = load_sweep(path)
    base = sdk.validate(str(spec.job_path))  # the job spec, and its script compiles
    if preempt_at is not None:  # bad flags fail here, before anything is recorded
        sdk.parse_preempt_at(preempt_at)
        arguments.number("--preempt-trial", preempt_trial, low=0, high=spec.trials - 1,
                         hint="Pass a trial number of this sweep, from 0.")
    sweep_id = f"{base.name[:40]}-sweep-{secrets.token_hex(3)}"
    study.create(sweep_id, spec)
    doc = {**spec.model_dump(mode="json"), "base_dir": spec.base_dir}
    # The base job as it was validated now: a resumed sweep runs its later trials from it too.
    options = {"base": {**base.model_dump(mode="json"), "base_dir": base.base_dir},
               **({"preempt_at": preempt_at, "preempt_trial": preempt_trial} if preempt_at else {})}
    db().create_sweep(sweep_id, base.name, json.dumps(doc), options)
    return sweep_id


def run(sweep_id: str, on_update: Callable[[], None] | None = None) -> dict[str, Any]:
    """Drive the sweep to its end in this process; its status document."""
    SweepRunner(sweep_id, on_update=on_update).run()
    return status(sweep_id)


def start_detached(sweep_id: str) -> int:
    """Start the sweep's controller as a detached process; its pid."""
    log = home() / "logs" / sweep_id / "sweep.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "spotfit.sweep", sweep_id], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ})
    return proc.pid


def resume(ref: str, detach: bool = False, on_update: Callable[[], None] | None = None) -> dict[str, Any]:
    """Give a sweep whose controller died a new one; it finishes the sweep."""
    sweep = db().get_sweep(ref)
    if sweep["state"] != "running":
        raise UsageError(f"Sweep {sweep['id']} is {sweep['state']}: only a running sweep resumes.",
                         hint="Start a new one with `spotfit sweep SWEEP.yaml`.")
    if controller_alive(sweep):
        raise UsageError(f"Sweep {sweep['id']} already has a live controller ({sweep['lease_owner']}: host/pid/token).",
                         hint=f"Watch it with `spotfit sweep status {sweep['id']}`.")
    if detach:
        start_detached(sweep["id"])
        return status(sweep["id"])
    return run(sweep["id"], on_update)


def status(ref: str) -> dict[str, Any]:
    """The leaderboard document (`spotfit sweep status --json`)."""
    return report.status(db(), sdk.db(), db().get_sweep(ref))


def compare(ref: str, out: str | None = None) -> dict[str, Any]:
    """Write the comparison table and Optuna's plots to an HTML file; {id, path}."""
    return report.write_compare(db(), sdk.db(), db().get_sweep(ref), out)


def is_sweep(ref: str) -> bool:
    """Whether `ref` names a sweep (for `spotfit cancel`, which takes a job or a sweep)."""
    return db().find_sweep(ref) is not None


def cancel(ref: str) -> dict[str, Any]:
    """Stop the sweep: every running trial saves a checkpoint and stops; nothing new starts."""
    sweeps = db()
    sweep = sweeps.get_sweep(ref)
    if sweep["state"] == "running":
        sweeps.update_sweep(sweep["id"], cancel_requested=1)
        if not controller_alive(sweep):
            SweepRunner(sweep["id"]).stop_all("cancelled", "cancelled by the user (no live sweep controller)")
    return status(sweep["id"])


def open_trial_jobs(ref: str) -> list[str]:
    """Job ids of the sweep's trials that are not closed (for tests and scripts)."""
    return [t["job_id"] for t in db().trials(db().get_sweep(ref)["id"]) if t["job_id"] and t["state"] not in FINAL]
