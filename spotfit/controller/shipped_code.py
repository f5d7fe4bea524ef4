"""The script's folder travels with a job submitted to a shared state.

A laptop that submits to a team's state (`SPOTFIT_STATE_URL`) may close at once, and the
controller that drives the job runs elsewhere (a pod in the cluster): it cannot read the
laptop's folder. So `spotfit run` on a shared state packs the script's folder into the job's
store (`code/submitted.tar.gz`, the same reproducible archive the AWS backend ships), and a
controller that does not find the folder where the spec was read unpacks that archive under
`$SPOTFIT_HOME/code/JOB/` and runs the job from there. A controller on the submitting machine
finds the folder itself and reads nothing.

Example (the folder is where the spec says: nothing to do):

>>> from spotfit.spec.job import JobSpec
>>> spec = JobSpec.model_validate({"name": "x", "script": "doctest.py", "base_dir": __import__("os").getcwd()})
>>> localize(spec, store=None, job_id="x-1") is spec
True
"""

from __future__ import annotations

import io
import tarfile
from typing import TYPE_CHECKING

from spotfit.attempt import layout
from spotfit.host.home import home

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec
    from spotfit.stores.base import ObjectStore

KEY = layout.SUBMITTED_CODE


def ship(spec: JobSpec, store: ObjectStore) -> None:
    """Pack the script's folder into the job's store (at submission, on a shared state)."""
    from spotfit.backends.shipping import code_archive

    store.write_bytes(KEY, code_archive(spec.script_path.parent))


def localize(spec: JobSpec, store: ObjectStore | None, job_id: str) -> JobSpec:
    """`spec`, run from the shipped copy of its folder when the original is not on this machine."""
    folder = spec.script_path.parent
    if folder.is_dir() or store is None or not store.exists(KEY):
        return spec
    target = home() / "code" / job_id
    if not target.is_dir():
        partial = target.with_name(target.name + ".partial")
        with tarfile.open(fileobj=io.BytesIO(store.read_bytes(KEY)), mode="r:gz") as tar:
            tar.extractall(partial, filter="data")  # no absolute paths, no escapes, no devices
        partial.rename(target)
    relative = spec.script_path.relative_to(folder)
    return spec.model_copy(update={"base_dir": str(target), "script": str(relative)})
