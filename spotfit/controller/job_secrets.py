"""The spec's `secrets:`: names whose values come from the submitting shell and are never stored in clear.

`read_from_shell` takes each value from the environment of `spotfit run` (a name that is not
set there is a usage error). Where the values go then depends on the backend: `local` passes
them to the attempt's processes through the controller's own environment (which the controller
inherits from that shell), and checks before each launch that they are still there
(`check_present`); `aws` stores them in SSM Parameter Store at submit time and deletes them when
the job ends (backends/aws/secrets.py); `gcp` does the same with Secret Manager
(backends/gcp/secrets.py). Only the names are ever written anywhere. A notebook's
token travels the same way (`SPOTFIT_NOTEBOOK_TOKEN`), beside its 0600 file on this machine.

`notify.webhook` is a secret too, of the controller (the attempt never needs it): `{secret: NAME}`
is read from the controller's environment, and a literal URL is kept in this process's
environment only (`keep_webhook`), which the job's controller inherits and takes into its memory.

Example:

>>> read_from_shell(["HOME_OF_A_TEST"], {"HOME_OF_A_TEST": "x"})
{'HOME_OF_A_TEST': 'x'}
>>> try:
...     read_from_shell(["UNSET_NAME"], {})
... except UsageError as err:
...     print(err.message)
Secret `UNSET_NAME` (spec `secrets:`) is not set in this shell: expected its value in the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from spotfit.errors import UsageError

if TYPE_CHECKING:
    from spotfit.backends.base import Backend
    from spotfit.spec.job import JobSpec
    from spotfit.spec.rules import Notify
    from spotfit.state.db import StateDB
    from spotfit.stores.base import ObjectStore


def read_from_shell(names: list[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The values of `names` in `environ`; a usage error naming the first one that is not set."""
    for name in names:
        if name not in environ:
            raise UsageError(f"Secret `{name}` (spec `secrets:`) is not set in this shell: expected its value in "
                             "the environment.",
                             hint=f"Run `export {name}=...` (or `read -s {name}; export {name}`) before `spotfit run`, "
                                  "or remove it from `secrets:`.")
    return {name: environ[name] for name in names}


def check_present(names: list[str]) -> None:
    """Before a local launch: the controller's environment still holds every secret."""
    for name in names:
        if name not in os.environ:
            raise UsageError(f"Secret `{name}` (spec `secrets:`) is not in the controller's environment, so the "
                             "attempt cannot get it.",
                             hint=f"Resume the job from a shell where {name} is set (`spotfit resume JOB`).")


def store_at_submit(backend_name: str, job_id: str, spec: JobSpec, values: dict[str, str],
                    store: ObjectStore) -> None:
    """Put the values where the backend's attempts read them (a `SecretKeeper`, aws: SSM); local keeps them in
    memory only."""
    if not values:
        return
    from spotfit.backends.base import SecretKeeper, make_backend

    backend = make_backend(backend_name)
    if isinstance(backend, SecretKeeper):
        backend.put_job_secrets(job_id, values, spec, store)


def release(backend: Backend[Any], db: StateDB, job_id: str, spec: JobSpec, state: str) -> None:
    """The job ended (a stopped job may resume: its secrets stay): delete what `store_at_submit` stored,
    and a notebook's token file."""
    if state == "stopped" or not (spec.secrets or spec.is_notebook):
        return
    if spec.is_notebook:
        from spotfit.attempt.notebook import forget_token

        forget_token(job_id)
    from spotfit.backends.base import SecretKeeper
    from spotfit.errors import SpotfitError

    if not isinstance(backend, SecretKeeper):
        return
    try:
        backend.delete_job_secrets(job_id, spec)
    except SpotfitError as exc:  # the job's end stands; the secrets stay until `spotfit gc` deletes them
        db.add_event(job_id, "secrets_left", f"{exc.message} (`spotfit gc --backend {spec.backend}` deletes them "
                     "later, or delete them by hand)", hint=exc.hint)


WEBHOOK_ENV_PREFIX = "SPOTFIT_WEBHOOK_"


def webhook_env(job_id: str) -> str:
    """The variable of this process that carries job `job_id`'s literal webhook URL to its controller."""
    return WEBHOOK_ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", job_id).upper()


def keep_webhook(job_id: str, notify: Notify | None, shared: bool,
                 environ: MutableMapping[str, str] | None = None) -> None:
    """At submit: a named webhook must be set here; a literal one is kept in the environment, never on disk."""
    from spotfit.spec.rules import is_redacted

    env: MutableMapping[str, str] = os.environ if environ is None else environ
    if notify is None:
        return
    if (name := notify.webhook_secret) is not None:
        if name not in env:
            raise UsageError(f"Secret `{name}` (spec `notify.webhook`) is not set in this shell: expected the "
                             "webhook URL in the environment.",
                             hint=f"Run `read -s {name}; export {name}` before `spotfit run`.")
        return
    if isinstance(notify.webhook, str) and not is_redacted(notify.webhook):
        if shared:
            raise UsageError("Invalid `notify.webhook`: a literal URL is kept in this shell's memory only, and the "
                             "jobs of a shared state are driven by `spotfit controller`s elsewhere.",
                             hint="Give it as `notify: {webhook: {secret: NAME}}` and set NAME in the environment "
                                  "of the `spotfit controller`s.")
        env[webhook_env(job_id)] = notify.webhook
