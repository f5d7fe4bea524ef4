"""The gcp backend's answers to `spotfit gc` and `spotfit market record` (backends/base.py:
`LeftoverCollector`, `MarketRecorder`): arguments checked here, before any Google call.

`spotfit gc --backend gcp` lists, in the project, the VMs and the disks labelled
`spotfit-managed=true` (one `aggregatedList` each, every zone at once; `--region` narrows to
regions or zones) whose `spotfit-job` label is no job of `keep`, and the disks among them no VM
uses; unless `--dry-run` it deletes the VMs (their boot disks go with them), then the disks.
Then the Secret Manager secrets of the ended jobs (`ended_secrets`: {job id: project}), found by
their labels, never read. The report has the shape of aws's (`regions`: one entry per zone,
`secrets`: one per job), so `spotfit gc` prints and merges both.
"""

from __future__ import annotations

import os
import re
from typing import Any

from spotfit import arguments
from spotfit.backends.gcp import client as gc
from spotfit.backends.gcp.launch import LABEL_JOB, LABEL_MANAGED, label_value
from spotfit.errors import BackendError, SpotfitError, UsageError

REGION = r"[a-z]+-[a-z]+\d+"
PLACE = rf"{REGION}(-[a-z])?"


def owns_place(place: str) -> bool:
    """Whether `place` is a Compute Engine region or zone (us-central1, us-central1-a)."""
    return re.fullmatch(PLACE, place) is not None


def project_of(backend: Any) -> str:
    project = backend.project or os.environ.get("GOOGLE_CLOUD_PROJECT")
    if not project:
        raise UsageError("No Google Cloud project for the gcp backend: $GOOGLE_CLOUD_PROJECT is not set.",
                         hint="Run `export GOOGLE_CLOUD_PROJECT=MY-PROJECT` (the project the jobs ran in).")
    return str(project)


# -- spotfit gc ---------------------------------------------------------------------------------------


def leftovers(backend: Any, places: list[str] | None, keep: set[str], job: str | None, dry_run: bool,
              ended_secrets: dict[str, str]) -> dict[str, Any]:
    """Find (and unless `dry_run`, delete) the project's VMs and disks of jobs not in `keep`, then the
    secrets of `ended_secrets`; one JSON-able report (see the module doc)."""
    for place in places or []:
        arguments.text("--region", place, pattern=PLACE, expected="a Compute Engine region or zone such as "
                       "us-central1 or us-central1-a", hint="Pass --region us-central1 (repeat it for more).")
    project = project_of(backend)
    kept = {label_value(j) for j in keep}
    only = label_value(job) if job else None

    def wanted(labels: Any, zone: str) -> str | None:
        owner = dict(labels or {}).get(LABEL_JOB, "?")
        if owner in kept or (only is not None and owner != only):
            return None
        if places and not any(zone == p or zone.rsplit("-", 1)[0] == p for p in places):
            return None
        return str(owner)

    report: dict[str, Any] = {"dry_run": dry_run, "kept_jobs": sorted(keep), "project": project, "regions": []}
    try:
        clients = backend.clients()
        disks_client = gc.disks_client(backend.endpoint, backend.credentials)
        label_filter = f"labels.{LABEL_MANAGED}=true"
        zones: dict[str, dict[str, Any]] = {}

        def entry(zone: str) -> dict[str, Any]:
            return zones.setdefault(zone, {"region": zone, "found": {"instances": {}, "disks": {}}, "count": 0})

        for scope, listed in clients.instances.aggregated_list(request={"project": project, "filter": label_filter}):
            zone = scope.rsplit("/", 1)[-1]
            for vm in listed.instances:
                owner = wanted(vm.labels, zone)
                if owner is not None:
                    entry(zone)["found"]["instances"][vm.name] = owner
        for scope, listed in disks_client.aggregated_list(request={"project": project, "filter": label_filter}):
            zone = scope.rsplit("/", 1)[-1]
            for disk in listed.disks:
                owner = wanted(disk.labels, zone)
                if owner is not None and not disk.users:  # an attached boot disk goes with its VM
                    entry(zone)["found"]["disks"][disk.name] = owner
        for zone, item in sorted(zones.items()):
            item["count"] = len(item["found"]["instances"]) + len(item["found"]["disks"])
            if item["count"] and not dry_run:
                item["still_in_use"] = _remove(backend, disks_client, project, zone, item["found"])
        report["regions"] = [item for _, item in sorted(zones.items()) if item["count"]]
        report["secrets"] = _secrets(backend, ended_secrets, dry_run)
    except SpotfitError:
        raise
    except Exception as exc:
        reason = gc.sdk_failure(exc)
        if reason is None:
            raise
        raise BackendError(f"Could not clean up Compute Engine in project {project}: {reason}",
                           hint="Check the credentials, the project and SPOTFIT_GCP_ENDPOINT; docs/gcp.md lists "
                                "the roles `spotfit gc` needs.") from None
    return report


def _remove(backend: Any, disks_client: Any, project: str, zone: str, found: dict[str, Any]) -> list[str]:
    """Delete the VMs (waiting for each operation), then the disks; returns the disks still in use."""
    ops = []
    for name in found["instances"]:
        try:
            ops.append(backend.clients().instances.delete(project=project, zone=zone, instance=name))
        except Exception as exc:
            if not gc.is_not_found(exc):
                raise
    for op in ops:
        backend._wait(project, zone, op)
    in_use = []
    for name in found["disks"]:
        try:
            backend._wait(project, zone, disks_client.delete(project=project, zone=zone, disk=name))
        except Exception as exc:
            if gc.is_not_found(exc):
                continue
            if "resourceInUseByAnotherResource" not in gc.error_codes(exc):
                raise
            in_use.append(name)
    return in_use


def _secrets(backend: Any, ended: dict[str, str], dry_run: bool) -> list[dict[str, Any]]:
    """The Secret Manager secrets of the ended jobs ({job id: project}), deleted unless `dry_run`."""
    out = []
    for job_id, project in sorted(ended.items()):
        manager = backend.secret_manager(project)
        ids = [s["id"] for s in manager.find(job_id)]
        if not ids:
            continue
        if not dry_run:
            for sid in ids:
                manager.delete(sid)
        out.append({"job": job_id, "region": project, "parameters": ids, "backend": "gcp"})
    return out
