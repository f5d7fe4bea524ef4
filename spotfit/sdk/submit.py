"""Submitting a job: validate its spec, check the backend, record it pending (`spotfit run`)."""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spotfit.attempt import layout
from spotfit.controller import job_secrets
from spotfit.errors import UsageError
from spotfit.host.home import default_store_url, state_is_shared
from spotfit.script import keras2, scriptcheck
from spotfit.sdk.context import db
from spotfit.state.states import JobState

if TYPE_CHECKING:  # the spec (pydantic) and the stores (fsspec) load on first use
    from spotfit.spec.job import JobSpec
    from spotfit.spec.sections import Preemption
    from spotfit.stores.base import ObjectStore


def validate(path: str, backend: str | None = None) -> JobSpec:
    """Load and validate a job spec, and compile its script; raises `SpecError` with one clear line.

    `backend` (`--backend`) overrides the spec's for the checks that depend on it."""
    from spotfit.spec.job import load_spec

    spec = load_spec(path)
    if not spec.is_notebook:
        scriptcheck.check_syntax(spec.script_path, spec.script)
        keras_choice(spec)
    check_data_volume(spec, backend or spec.backend)
    check_paths(spec, path)
    return spec


def keras_choice(spec: JobSpec) -> keras2.KerasChoice:
    """The Keras the spec's script runs on (`training.keras`); a setting Keras 2 cannot honour raises `SpecError`."""
    choice = keras2.choose(spec.training.keras, spec.script_path)
    if choice.version == "2" and (error := keras2.keras2_conflict(spec)) is not None:
        raise error
    return choice


def check_paths(spec: JobSpec, source: str) -> None:
    """The local paths the spec names are inside the roots its controller may write to (host/confine.py):
    the owner's (the home, $SPOTFIT_HOME, the spec's folder, `paths.allow`), or on a shared state
    a shared controller's (`paths.shared`); else one `SpecError` line naming the setting."""
    from spotfit.host import confine

    roots = confine.shared_roots() if state_is_shared() else confine.owner_roots(spec.base_dir)
    confine.check(spec, roots, source)


def check_data_volume(spec: JobSpec, backend: str) -> None:
    """`data.volume` is one the backend declares (`BackendTraits.data_volumes`); else one `SpecError` line."""
    from spotfit.backends.base import backend_class
    from spotfit.errors import SpecError

    volume = spec.data.volume if spec.data else "root"
    allowed = backend_class(backend).data_volumes
    if volume not in allowed:
        raise SpecError(f"Invalid `data.volume`: received {volume!r} with backend {backend!r}, expected "
                        f"{' or '.join(repr(v) for v in allowed)} (`snapshot` is for the aws backend).",
                        hint="Remove `data.volume`, or run the job with `--backend aws`.")


_PREEMPTION = re.compile(r"(\d+)(?::(\d+(?:\.\d*)?|\.\d+))?", re.ASCII)  # STEP[:NOTICE_S], ASCII digits


def parse_preempt_at(text: str) -> list[Preemption]:
    """`"40:5,80"` -> preemptions at step 40 (5 s notice) and 80 (default notice)."""
    from spotfit.spec.sections import Preemption

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


def submit(path: str, preempt_at: str | None = None, backend: str | None = None,
           allow_duplicate: bool = False) -> str:
    """Validate the spec and record a new pending job; returns its id.

    `backend` overrides the spec's `backend:` for this job (`spotfit run --backend`).
    """
    from spotfit.spec.job import load_spec

    spec = load_spec(path)
    check_paths(spec, path)  # named by its file here; submit_spec checks again for the other callers
    return submit_spec(spec, preempt_at=preempt_at, backend=backend, allow_duplicate=allow_duplicate)


def duplicate_error(name: str, live: dict[str, Any]) -> UsageError:
    """A job named `name` is refused: `live`, a job of that name, has not ended."""
    return UsageError(
        f"A job named {name!r} is already live: {live['id']} ({live['state']}). Two jobs of one name would both "
        "run and bill, and `spotfit status NAME` would show only the newer.",
        hint=f"Watch it (`spotfit status {live['id']}`) or end it (`spotfit cancel {live['id']}`), give this job "
             "another `name:`, or pass --allow-duplicate to run both.",
    )


def submit_spec(spec: JobSpec, preempt_at: str | None = None, backend: str | None = None,
                before_record: Callable[[str, ObjectStore], None] | None = None,
                state: JobState = JobState.PENDING, allow_duplicate: bool = False) -> str:
    """Record a new pending job for a validated spec; returns its id (`submit` reads the file).

    `state` is `queued` for a batch's job (`spotfit submit`): no controller takes it until its
    batch's queue releases it. Unless `allow_duplicate`, a job with the name of a live job is
    refused (`duplicate_error`), before anything is written.

    `before_record(job_id, store)` writes what the job needs in its store before the job is
    recorded (a notebook's token and seed files), so no controller sees it without them.
    """
    from spotfit.controller import waits
    from spotfit.core.registry import registered_backends
    from spotfit.host.settings import load_settings
    from spotfit.stores import child, open_store

    chosen = spec.backend if backend is None else backend
    if chosen not in registered_backends():
        raise UsageError(
            f"Invalid backend: received {chosen!r}, expected one of {', '.join(registered_backends())}.",
            hint=f"Use --backend with one of {', '.join(registered_backends())}; local is the embedded default.",
        )
    spec.backend = chosen  # checked against the registry above
    choice = None if spec.is_notebook else keras_choice(spec)
    check_data_volume(spec, chosen)
    check_paths(spec, f"job spec {spec.name!r}")
    if not allow_duplicate and (live := db().live_job_named(spec.name)) is not None:
        raise duplicate_error(spec.name, live)
    if not spec.is_notebook:  # a script that cannot compile fails every attempt: refuse it before any launch
        scriptcheck.check_syntax(spec.script_path, spec.script)
    notes = _backend_preflight(spec)
    waits.scale()  # a bad SPOTFIT_WAIT_SCALE is refused before anything is recorded
    load_settings()  # so is a bad $SPOTFIT_HOME/config.yaml (the budgets the controller enforces)
    _check_sink_secrets(spec)
    if preempt_at is not None:
        spec.market.preemptions = [*spec.market.preemptions, *parse_preempt_at(preempt_at)]
    values = job_secrets.read_from_shell(spec.secrets)  # before anything is recorded
    job_id = f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    job_secrets.keep_webhook(job_id, spec.notify, shared=state_is_shared())  # every dump of the spec redacts it
    store_url = child(spec.checkpoint.store or default_store_url(), "jobs", job_id)
    store = open_store(store_url)
    if spec.is_notebook:  # its token: a 0600 file here and, on a cloud, the secret store (never the job's store)
        from spotfit.attempt.notebook import TOKEN_ENV, new_token

        values[TOKEN_ENV] = new_token(job_id)
    job_secrets.store_at_submit(chosen, job_id, spec, values, store)
    store.write_bytes(layout.SPEC, spec.model_dump_json(indent=2).encode())
    if state_is_shared() and not spec.is_notebook:  # the script's folder goes to the controller, wherever it runs
        from spotfit.controller import shipped_code

        shipped_code.ship(spec, store)
    if before_record is not None:
        before_record(job_id, store)
    doc = {**spec.model_dump(mode="json"), "base_dir": spec.base_dir}
    live = db().create_job(job_id, spec.name, json.dumps(doc), store_url, state, unique_live_name=not allow_duplicate)
    if live is not None:  # another submission of the name was recorded since the check above
        raise duplicate_error(spec.name, live)
    warning = None if spec.is_notebook else scriptcheck.warning_for(spec.script_path)
    if warning is not None:
        db().add_event(job_id, "nothing_checkpointed", warning)
    if choice is not None:
        name = spec.script_path.name
        db().add_event(job_id, "keras", keras2.choice_line(choice, name), version=choice.version, why=choice.why)
        if (keras_2 := keras2.warning_for(choice, name)) is not None:
            db().add_event(job_id, "keras2_code", keras_2)
    for note in notes:
        db().add_event(job_id, "backend_note", note)
    return job_id


def _backend_preflight(spec: JobSpec) -> list[str]:
    """The backend's checks before anything is recorded (kubeconfig, context, TFJob CRD); its notes."""
    from spotfit.backends.base import Preflight, make_backend

    backend = make_backend(spec.backend)
    return backend.preflight(spec) if isinstance(backend, Preflight) else []


def _check_sink_secrets(spec: JobSpec) -> None:
    """Each `notify.sinks` URL the spec names as `{secret: NAME}` is set here, as `secrets:` must be."""
    from spotfit.spec.sinks import SecretRef

    for i, sink in enumerate(spec.notify.sinks if spec.notify else []):
        ref = sink.slack or sink.webhook
        if isinstance(ref, SecretRef) and ref.secret not in os.environ:
            raise UsageError(f"Secret `{ref.secret}` (spec `notify.sinks[{i}].{sink.kind}`) is not set in this shell: "
                             "expected the URL in the environment.",
                             hint=f"Run `read -s {ref.secret}; export {ref.secret}` before `spotfit run`; the "
                                  "controller needs it too.")
