"""What `spotfit run --backend gcp` checks before it records the job: each failure is one line, exit 2.

- a project (`gcp.project` or `$GOOGLE_CLOUD_PROJECT`);
- credentials: Application Default Credentials, unless the backend talks to another endpoint
  (`SPOTFIT_GCP_ENDPOINT`, the tests' emulator), which takes none;
- with no `market.zones`, no `gcp.zones` and no `market.trace`, the zones: those of the region
  `spotfit plan` ranks cheapest (or `gcp.region`) that Compute Engine lists with the job's machine
  type and GPU (placement.py); they become the job's `market.zones`, and a note says which and why;
- every zone the job may use offers the job's accelerator × count (machines.py, bundled catalog);
- a `gcp.machine_type` that is a Compute Engine machine type able to carry those GPUs (an N1 size
  for attached V100/T4/P100/P4, the catalog's A2/A3/G2 types with the bundled GPU);
- a `gs://` store whose bucket exists (the VMs reach no other store);
- a job with `secrets:` (or a notebook's token) and no `gcp.service_account` gets a note: its VMs
  have no identity to read Secret Manager with (a real run's agent then fails at once).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from spotfit.backends.gcp import client as gc
from spotfit.backends.gcp.machines import machine_for
from spotfit.backends.gcp.spec import Gcp
from spotfit.errors import UsageError

if TYPE_CHECKING:
    from spotfit.backends.gcp.backend import GcpBackend
    from spotfit.spec.job import JobSpec

PROJECT_ENV = "GOOGLE_CLOUD_PROJECT"


def preflight(backend: GcpBackend, spec: JobSpec) -> list[str]:
    """Raise `UsageError` for what cannot work; the notes returned say what was chosen instead."""
    notes: list[str] = []
    section = Gcp.of(spec)
    if (spec.secrets or spec.is_notebook) and not section.service_account:
        notes.append("`secrets:` on gcp without `gcp.service_account`: the VMs read Secret Manager as their service "
                     "account, so set one with roles/secretmanager.secretAccessor (docs/gcp.md#secrets)")
    if not (section.project or backend.project or os.environ.get(PROJECT_ENV)):
        raise UsageError("No Google Cloud project for the gcp backend: `gcp.project` is not set and neither is "
                         f"${PROJECT_ENV}.", hint="Set `gcp.project: MY-PROJECT` in the job spec.")
    if not (backend.endpoint or os.environ.get(gc.ENDPOINT_ENV) or backend.credentials):
        check_credentials()
    zones = list(spec.market.zones) or list(section.zones)
    if not zones and not spec.market.trace:
        from spotfit.backends.gcp.placement import place

        project = section.project or backend.project or os.environ.get(PROJECT_ENV)
        placement = place(spec, str(project), backend.endpoint, backend.credentials)
        spec.market.zones = placement.zones  # recorded with the job: the policy picks among them
        notes.append(placement.note())
        zones = []  # listed by the API with the machine and GPU: no catalog check
    elif not zones:
        zones = [f"{section.region or 'us-central1'}-a"]
        notes.append(f"no `market.zones` or `gcp.zones` and a replayed `market.trace`: the gcp backend launches in "
                     f"{zones[0]}; set `market.trace: null` to launch in the region `spotfit plan` ranks cheapest, "
                     "or `market.zones`")
    for zone in zones:
        machine_for(spec.resources.accelerator, spec.resources.count, zone, section.machine_type)
    check_store(spec.checkpoint.store or "", allow_local=backend.allow_local_store)
    return notes


def check_credentials() -> None:
    """`UsageError` when Application Default Credentials cannot be found."""
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
    except ImportError:
        gc.compute()  # raises the install hint
        return
    try:
        google.auth.default()
    except DefaultCredentialsError:
        raise UsageError("No Google Cloud credentials for the gcp backend: Application Default Credentials were "
                         "not found.", hint="Run `gcloud auth application-default login`, or set "
                                            "GOOGLE_APPLICATION_CREDENTIALS to a key file.") from None


def check_store(url: str, allow_local: bool = False) -> None:
    """The job's store must be a `gs://` bucket that exists."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if allow_local and scheme in ("file", "memory"):
        return
    if scheme not in ("gs", "gcs"):
        raise UsageError(f"Invalid `checkpoint.store` for the gcp backend: received {url or 'none'!r}, expected a "
                         "gs:// URL that the VMs can reach.", hint="Set `checkpoint.store: gs://BUCKET/PREFIX`.")
    from spotfit.stores.fsspec_store import FsspecStore

    bucket = url.split("://", 1)[1].split("/", 1)[0]
    store = FsspecStore(f"{scheme}://{bucket}")
    try:
        found = store.fs.exists(bucket)
    except Exception as exc:  # noqa: BLE001 - gcsfs raises several kinds; any of them means "cannot use it"
        raise UsageError(f"Invalid `checkpoint.store`: cannot reach the bucket gs://{bucket} ({exc}).",
                         hint="Check the bucket name and the credentials (storage.buckets.get).") from None
    if not found:
        raise UsageError(f"Invalid `checkpoint.store`: the bucket gs://{bucket} does not exist.",
                         hint=f"Create it (`gcloud storage buckets create gs://{bucket}`) or fix the name.")
