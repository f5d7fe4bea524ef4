"""The tool verbs: cloud dry runs and clean-up, `doctor` and TensorBoard (the dashboard: `spotfit.ui.launch`)."""

from __future__ import annotations

import json
from collections.abc import Callable

from spotfit import arguments
from spotfit.errors import UsageError
from spotfit.home import home
from spotfit.sdk.context import db, find_job
from spotfit.sdk.submit import validate
from spotfit.state.states import JobState


def dry_run(path: str, backend: str | None = None) -> dict:
    """The exact cloud requests of the job's first attempt; nothing is sent or recorded (`run --dry-run`)."""
    from spotfit.backends.base import DryRunner, backend_class, make_backend
    from spotfit.registry import registered_backends

    chosen = validate(path).backend if backend is None else backend
    runner = make_backend(chosen) if chosen in registered_backends() else None
    if not isinstance(runner, DryRunner):  # the backends that send cloud requests
        names = [n for n in registered_backends() if issubclass(backend_class(n), DryRunner)]
        raise UsageError(f"Invalid --dry-run: received backend {chosen!r}, expected {' or '.join(names)} (the "
                         "backends that send cloud requests).",
                         hint=f"Add --backend {names[0]} (or {', '.join(names[1:])}), or leave --dry-run out.")
    return runner.dry_run(path)


def gc(regions: list[str] | None = None, job: str | None = None, dry_run: bool = False,
       include_active: bool = False, backend: str | None = None) -> dict:
    """Find (and unless `dry_run`, remove) the cloud resources spotfit left behind, by tag (`spotfit gc`).

    `backend` is one that can leave resources behind (`LeftoverCollector`); by default the only
    one registered (aws). Resources of jobs still active in this state DB are kept unless
    `include_active`. The secrets of this state DB's jobs on that backend that ended for good
    (`secrets` in the report) go too, each where the job kept them; those of active or stopped
    (resumable) jobs never do.
    """
    from spotfit.backends.base import LeftoverCollector, able_backend, make_backend

    if job is not None:
        arguments.text("--job", job, expected="a job id", hint="Leave --job out to clean up after every job.")
    chosen = able_backend(backend, LeftoverCollector, "leave resources behind in a cloud")
    collector = make_backend(chosen)
    assert isinstance(collector, LeftoverCollector)
    keep = set() if include_active else {
        j["id"] for j in db().list_jobs(limit=1_000_000) if not JobState(j["state"]).is_terminal()}
    return collector.collect_leftovers(regions, keep, job, dry_run, _ended_with_secrets(job, chosen))


def _ended_with_secrets(job: str | None, backend: str) -> dict[str, str]:
    """{job id: where its secrets are} of `backend`'s jobs with `secrets:` (or a notebook's token) that ended
    for good (`job`'s only)."""
    from spotfit.backends.base import SecretKeeper, make_backend
    from spotfit.spec.job import JobSpec

    ended: dict[str, str] = {}
    keeper = make_backend(backend)
    if not isinstance(keeper, SecretKeeper):
        return ended
    for row in db().list_jobs(limit=1_000_000):
        state = JobState(row["state"])
        if not state.is_terminal() or state.is_resumable() or job not in (None, row["id"]):
            continue
        spec = JobSpec.model_validate(json.loads(row["spec_json"]))
        if spec.backend == backend and (spec.secrets or spec.is_notebook):  # a notebook's token is one
            ended[row["id"]] = keeper.job_secrets_region(spec)
    return ended


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
    job = find_job(db(), ref)
    started = (lambda url, logdir: on_start(job["id"], url, logdir)) if on_start else None
    return tb.serve(job["store_url"], job["id"], port, home() / "cache" / "tensorboard", on_start=started)
