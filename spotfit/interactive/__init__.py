"""Interactive work on a job's running attempt: notebooks, `spotfit ssh`, `spotfit port-forward`.

The verbs return plain data, as `spotfit.sdk`'s do: where a notebook listens, and the exact
command (SSM, SSH, kubectl) that reaches an attempt on each backend (docs/notebooks.md).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from spotfit.backends.base import backend_class
from spotfit.errors import NotFoundError, UsageError
from spotfit.sdk.context import db, find_job
from spotfit.sdk.submit import submit_spec
from spotfit.state.records import AttemptRecord, JobRecord, raw_spec_of
from spotfit.state.states import AttemptState, JobState

if TYPE_CHECKING:
    from spotfit.backends.base import LaunchOptions


def notebook(path: str | None = None, backend: str | None = None) -> str:
    """Record a `kind: notebook` job (the spec at `path`, or the default one); returns its id."""
    from spotfit.interactive import notebooks

    spec = notebooks.notebook_spec(path)
    # Several notebooks may be open at once: each `spotfit notebook` without a spec is named "notebook".
    return submit_spec(spec, backend=backend, allow_duplicate=True,
                       before_record=lambda job_id, store: notebooks.seed(spec, job_id, store))


def notebook_where(ref: str, wait_s: float = 0.0) -> dict:
    """Where the notebook `ref` listens: `{id, url, token_file, attempt, backend, port, forward}`.

    `url` is the local URL without the token (it is in `token_file`); `forward` is the command
    that carries the port here (None on the local backend). Waits up to `wait_s` for a live
    attempt whose server is up; raises `NotFoundError` when none is.
    """
    from spotfit.attempt.notebook import token_file
    from spotfit.interactive import access, notebooks
    from spotfit.stores import open_store

    job = find_job(db(), ref)
    deadline = time.monotonic() + wait_s
    while True:
        job = db().get_job(job["id"])
        live = [a for a in db().attempts(job["id"]) if AttemptState(a["state"]).is_live()]
        info = notebooks.server_info(open_store(job["store_url"]), live[-1]["number"] if live else None)
        if info is not None or JobState(job["state"]).is_terminal() or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if info is None:
        raise NotFoundError(f"Notebook {job['id']} is {job['state']} and has no server up: {job['message'] or ''}",
                            hint=f"See `spotfit logs {job['id']}`; a stopped notebook starts again with "
                                 f"`spotfit resume {job['id']}`.")
    backend = raw_spec_of(job).get("backend", "local")
    port = info["port"]
    forward = None
    if not backend_class(backend).runs_here:  # the same port here, carried by the backend's forwarding
        forward = access.port_forward_command(backend, _live_handle(job)[1], _options(job), port, port)
    return {"id": job["id"], "url": notebooks.url(port), "token_file": str(token_file(job["id"])),
            "attempt": info["attempt"], "backend": backend, "port": port, "forward": forward}


def _options(job: JobRecord) -> LaunchOptions:
    """What `ssh` and `port-forward` need of the job's launch: its backend's section as the job recorded it."""
    from spotfit.backends.base import LaunchOptions
    from spotfit.core.registry import BACKENDS, load

    spec = raw_spec_of(job)
    name = spec.get("backend", "local")
    entry = BACKENDS.get(name)
    if entry is None or entry.section is None:
        return LaunchOptions()
    return LaunchOptions(section=load(entry.section).model_construct(**(spec.get(name) or {})))


def _live_handle(job: JobRecord) -> tuple[AttemptRecord, object]:
    """The job's live attempt row and its backend handle; `UsageError` when none runs."""
    from spotfit.backends.base import make_backend

    live = [a for a in db().attempts(job["id"]) if AttemptState(a["state"]).is_live() and a["handle"]]
    if not live:
        raise UsageError(f"Job {job['id']} has no running attempt ({job['state']}).",
                         hint=f"See `spotfit status {job['id']}`.")
    backend = make_backend(raw_spec_of(job).get("backend", "local"))
    return live[-1], backend.load_handle(str(live[-1]["handle"]))  # live: each has a handle


def shell(ref: str, command: list[str] | None = None) -> dict:
    """How to reach the running attempt of `ref`: `{id, backend, argv, cwd}` (`spotfit ssh`).

    On the local backend `cwd` is the attempt's folder (a notebook's working folder, a script's
    folder); elsewhere `argv` is the SSM / SSH / kubectl command and `cwd` is None.
    """
    from spotfit.interactive import access

    job = find_job(db(), ref)
    attempt, handle = _live_handle(job)
    backend = raw_spec_of(job).get("backend", "local")
    cwd = _local_folder(job, attempt["number"]) if backend_class(backend).runs_here else None
    return {"id": job["id"], "backend": backend, "attempt": attempt["number"],
            "argv": access.shell_command(backend, handle, _options(job), list(command or [])), "cwd": cwd}


def _local_folder(job: JobRecord, number: int) -> str:
    from spotfit.attempt import layout
    from spotfit.attempt.config import RuntimeConfig
    from spotfit.attempt.notebook import attempt_dir
    from spotfit.stores import open_store

    config = RuntimeConfig.from_json(open_store(job["store_url"]).read_bytes(layout.runtime_config(number)).decode())
    return str(attempt_dir(job["id"], number) / "work") if config.kind == "notebook" else config.workdir


def port_forward(ref: str, ports: str) -> dict:
    """How to carry 127.0.0.1:LOCAL here to REMOTE at the attempt: `{id, backend, local, remote, argv}`.

    `argv` is None on the local backend, where the CLI relays on loopback itself.
    """
    from spotfit.interactive import access

    local, remote = access.parse_ports(ports)
    job = find_job(db(), ref)
    _, handle = _live_handle(job)
    backend = raw_spec_of(job).get("backend", "local")
    return {"id": job["id"], "backend": backend, "local": local, "remote": remote,
            "argv": access.port_forward_command(backend, handle, _options(job), local, remote)}
