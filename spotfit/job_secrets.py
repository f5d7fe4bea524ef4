"""The spec's `secrets:`: names whose values come from the submitting shell and are never stored in clear.

`read_from_shell` takes each value from the environment of `spotfit run` (a name that is not
set there is a usage error). Where the values go then depends on the backend: `local` passes
them to the attempt's processes through the controller's own environment (which the controller
inherits from that shell), and checks before each launch that they are still there
(`check_present`); `aws` stores them in SSM Parameter Store at submit time and deletes them when
the job ends (backends/aws/secrets.py). Only the names are ever written anywhere.

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
from collections.abc import Mapping
from typing import Any

from spotfit.errors import UsageError


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


def store_at_submit(backend_name: str, job_id: str, spec, values: dict[str, str], store) -> None:
    """Put the values where the backend's attempts read them (aws: SSM); local keeps them in memory only."""
    if not values or backend_name != "aws":
        return
    from spotfit.backends.base import make_backend

    aws: Any = make_backend("aws")  # put_secrets is the aws backend's own, not the protocol's
    aws.put_secrets(job_id, values, spec.aws.model_dump(), list(spec.market.zones), store)


def release(backend, db, job_id: str, spec, state: str) -> None:
    """The job ended (a stopped job may resume: its secrets stay): delete what `store_at_submit` stored."""
    if not spec.secrets or state == "stopped" or not hasattr(backend, "delete_secrets"):
        return
    from spotfit.errors import SpotfitError

    try:
        backend.delete_secrets(job_id, spec.aws.model_dump(), list(spec.market.zones))
    except SpotfitError as exc:  # the job's end stands; the parameters stay until deleted by hand
        db.add_event(job_id, "secrets_left", f"{exc.message} (delete /spotfit/{job_id}/ in SSM by hand)",
                     hint=exc.hint)
