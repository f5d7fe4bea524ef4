"""The tool verbs: cloud dry runs and clean-up, `doctor` and TensorBoard (the dashboard: `spotfit.ui.launch`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from spotfit.core import arguments
from spotfit.host.home import home
from spotfit.sdk.context import db, find_job
from spotfit.sdk.submit import validate
from spotfit.state.states import JobState

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec
    from spotfit.state.records import JobRecord


def dry_run(path: str, backend: str | None = None) -> dict[str, Any]:
    """The exact cloud requests of the job's first attempt; nothing is sent or recorded (`run --dry-run`)."""
    from spotfit.backends.base import DryRunner, able_backend, make_backend
    from spotfit.core.registry import registered_backends

    spec = validate(path, backend if backend in registered_backends() else None)  # `data.volume` for the backend
    chosen = able_backend(spec.backend if backend is None else backend, DryRunner, "send cloud requests",
                          otherwise="leave --dry-run out")
    runner = make_backend(chosen)
    assert isinstance(runner, DryRunner)
    return runner.dry_run(path)


def gc(regions: list[str] | None = None, job: str | None = None, dry_run: bool = False,
       include_active: bool = False, backend: str | None = None) -> dict[str, Any]:
    """Find (and unless `dry_run`, remove) the cloud resources spotfit left behind, by tag (`spotfit gc`).

    `backend` is one that can leave resources behind (`LeftoverCollector`: aws, gcp); without it,
    every such backend is cleaned: with `regions`, each backend that owns one of them (an AWS
    region goes to aws, a Compute Engine region or zone to gcp) gets its own; without, every one,
    and one that is not set up here (gcp without a project) is reported under `skipped` instead.
    Resources of jobs still active in this state DB are kept unless `include_active`. Without
    `job`, the data snapshots (`data.volume: snapshot`) go too unless an active or resumable job
    names one of their sources (each source that used one is tagged on it: backends/aws/snapshots.py)
    and they hold its newest data (`include_active`: all of them). The
    secrets of this state DB's jobs on that backend that ended for good (`secrets` in the report)
    go too, each where the job kept them; those of active or stopped (resumable) jobs never do.
    The reports of the backends merge into one: `backends` names those cleaned, and each entry of
    `regions` and `secrets` says its `backend`.
    """
    from spotfit.backends.base import LeftoverCollector, able_backend, backend_class, make_backend
    from spotfit.core.registry import registered_backends
    from spotfit.errors import UsageError

    if job is not None:
        arguments.text("--job", job, expected="a job id", hint="Leave --job out to clean up after every job.")
    names = [n for n in registered_backends() if issubclass(backend_class(n), LeftoverCollector)]
    plan: list[tuple[str, list[str] | None]]
    if backend is not None or len(names) == 1:
        plan = [(able_backend(backend, LeftoverCollector, "leave resources behind in a cloud"), regions)]
    elif regions:
        collectors = {n: make_backend(n) for n in names}
        for place in regions:
            if not any(c.owns_place(place) for c in collectors.values() if isinstance(c, LeftoverCollector)):
                arguments.text("--region", place, pattern=r"(?!)", expected="an AWS region such as us-east-1 or a "
                               "Compute Engine region or zone such as us-central1",
                               hint="Pass --region us-east-1 (or --backend NAME with that cloud's regions).")
        plan = [(n, [p for p in regions if c.owns_place(p)]) for n, c in collectors.items()
                if isinstance(c, LeftoverCollector) and any(c.owns_place(p) for p in regions)]
    else:
        plan = [(n, None) for n in names]
    keep = set() if include_active else {
        j["id"] for j in db().list_jobs(limit=1_000_000) if not JobState(j["state"]).is_terminal()}
    keep_sources = None if job is not None else set() if include_active else _snapshot_sources()
    merged: dict[str, Any] = {"dry_run": dry_run, "kept_jobs": sorted(keep), "regions": [], "secrets": [],
                              "backends": []}
    for name, places in plan:
        collector = make_backend(name)
        assert isinstance(collector, LeftoverCollector)
        try:
            report = collector.collect_leftovers(places, keep, job, dry_run, _ended_with_secrets(job, name),
                                                 keep_sources)
        except UsageError as exc:
            if backend is not None or regions or len(plan) == 1:
                raise
            merged.setdefault("skipped", []).append({"backend": name, "reason": exc.message})
            continue
        if len(plan) == 1:
            return {**report, "backends": [name]}
        merged["backends"].append(name)
        if report.get("secret_store"):
            merged.setdefault("secret_stores", {})[name] = report["secret_store"]
        merged["regions"] += [{**entry, "backend": name} for entry in report.get("regions", [])]
        merged["secrets"] += [{**entry, "backend": name} for entry in report.get("secrets", [])]
    return merged


def _snapshot_sources() -> set[str]:
    """The `data.source` of this state DB's `data.volume: snapshot` jobs that may still run (active or
    resumable): the data snapshots that any of them used stay, whichever source made them."""
    sources = set()
    for _, spec in _job_specs(lambda state, _: not state.is_terminal() or state.is_resumable()):
        if spec.data is not None and spec.data.volume == "snapshot":
            sources.add(spec.data.source)
    return sources


def _job_specs(keep: Callable[[JobState, str], bool]) -> Iterator[tuple[JobRecord, JobSpec]]:
    """This state DB's jobs that `keep(state, job id)` keeps, each with its spec read into the typed `JobSpec`."""
    from spotfit.spec.job import spec_of  # the spec's models load only for the verbs that read specs

    for row in db().list_jobs(limit=1_000_000):
        if keep(JobState(row["state"]), row["id"]):
            yield row, spec_of(row)


def _ended_with_secrets(job: str | None, backend: str) -> dict[str, str]:
    """{job id: where its secrets are} of `backend`'s jobs with `secrets:` (or a notebook's token) that ended
    for good (`job`'s only)."""
    from spotfit.backends.base import SecretKeeper, make_backend

    ended: dict[str, str] = {}
    keeper = make_backend(backend)
    if not isinstance(keeper, SecretKeeper):
        return ended
    for row, spec in _job_specs(lambda state, job_id: state.is_terminal() and not state.is_resumable()
                                and job in (None, job_id)):
        if spec.backend == backend and (spec.secrets or spec.is_notebook):  # a notebook's token is one
            ended[row["id"]] = keeper.job_secrets_region(spec)
    return ended


def doctor(store: str | None = None, registry: str | None = None, spec: str | None = None) -> dict[str, Any]:
    """What this machine can train with, each problem with its fix (`spotfit doctor`; imports TensorFlow).

    With `spec`, also which Keras its script runs on and why, and whether that Keras is installed here."""
    from spotfit.runtime import doctor as checks

    for flag, url in (("--store", store), ("--registry", registry)):
        if url is not None:
            arguments.text(flag, url, pattern=r"[a-z0-9]+://\S*", expected="a URL such as file:///path or s3://bucket/prefix",
                           hint=f"Leave {flag} out to probe the home's.")
    choice = None
    if spec is not None:
        from spotfit.script import keras2
        from spotfit.spec.job import load_spec

        job = load_spec(spec)
        if not job.is_notebook:
            choice = (job.script_path.name, keras2.choose(job.training.keras, job.script_path))
    return checks.run(store, registry, keras_choice=choice)


def tensorboard(ref: str | None, port: int = 6006,
                on_start: Callable[[str, str, object], None] | None = None) -> int:
    """Serve a job's TensorBoard logs on 127.0.0.1:`port` until interrupted; TensorBoard's exit code.

    `on_start(job_id, url, logdir)` is called once the server runs.
    """
    from spotfit.attempt import tensorboard_server as tb

    arguments.number("--port", port, low=1, high=65_535, hint="Pass --port 6006.")
    job = find_job(db(), ref)
    started = (lambda url, logdir: on_start(job["id"], url, logdir)) if on_start else None
    return tb.serve(job["store_url"], job["id"], port, home() / "cache" / "tensorboard", on_start=started)
