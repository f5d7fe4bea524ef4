"""The exact `instances.insert` bodies of one attempt, as Compute Engine JSON (pure: no SDK, no network).

`insert_requests` returns one `Insert` per worker — project, zone and the instance resource in
the API's own field names — so that `spotfit run --backend gcp --dry-run` prints exactly what
`launch` sends. The instance names are derived from (job, attempt, worker), so a retried launch
asks for the same names and Compute Engine answers `alreadyExists` instead of starting a second
VM; `find` looks the attempt up by those names too.

Safe defaults, on purpose: no external IP (`gcp.external_ip`), no SSH key in the metadata (OS
Login, reached through IAP), the project's SSH keys blocked, the service account of the spec
with storage scopes only, and no secret in the metadata (`check_no_secrets`). A spot attempt is
`provisioningModel: SPOT` with `instanceTerminationAction: DELETE`: a preempted VM is deleted,
not kept stopped with its disk billed. Every GPU VM stops for host maintenance
(`onHostMaintenance: TERMINATE`) and never restarts by itself: the controller relaunches.

Example:

>>> s = LaunchSettings(project="my-project", zone="us-central1-a", machine=Machine("n1-standard-8",
...                    "nvidia-tesla-v100", 1), market=Market.SPOT)
>>> [r] = insert_requests(s, "job-1", 3, startup_script="#!/bin/bash")
>>> r.body["scheduling"]["provisioningModel"], r.body["scheduling"]["instanceTerminationAction"]
('SPOT', 'DELETE')
>>> r.body["guestAccelerators"][0]["acceleratorType"]
'zones/us-central1-a/acceleratorTypes/nvidia-tesla-v100'
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from spotfit.backends.gcp.machines import Machine
from spotfit.backends.gcp.spec import DEFAULT_IMAGE_FAMILY, DEFAULT_IMAGE_PROJECT, DEFAULT_SCOPES
from spotfit.errors import BackendError
from spotfit.state.states import Market

LABEL_MANAGED = "spotfit-managed"
LABEL_JOB = "spotfit-job"
LABEL_ATTEMPT = "spotfit-attempt"
META_JOB = "spotfit-job-id"  # the job id as given (labels allow only lowercase)
_SECRET_PATTERNS = (
    re.compile(r'"private_key"\s*:'),  # a service account key file
    re.compile(r"-----BEGIN (RSA )?PRIVATE KEY-----"),
    re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"),  # an OAuth access token
)


@dataclass(frozen=True)
class LaunchSettings:
    """Where and how to launch, resolved from the offer and the spec's `gcp:` section."""

    project: str
    zone: str
    machine: Machine
    market: Market
    workers: int = 1
    service_account: str | None = None
    scopes: tuple[str, ...] = tuple(DEFAULT_SCOPES)
    network: str = "global/networks/default"
    subnetwork: str | None = None
    external_ip: bool = False
    image_project: str = DEFAULT_IMAGE_PROJECT
    image_family: str = DEFAULT_IMAGE_FAMILY
    disk_size_gib: int = 100
    disk_type: str = "pd-balanced"
    extra_labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Insert:
    """One `instances.insert` call: the project, the zone and the instance resource."""

    project: str
    zone: str
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.body["name"])

    def to_json(self) -> dict[str, Any]:
        """The call as `spotfit run --dry-run --json` prints it (the operation and its exact parameters)."""
        return {"operation": "compute.instances.insert",
                "params": {"project": self.project, "zone": self.zone, "instanceResource": self.body}}


def label_value(text: str) -> str:
    """`text` as a label value: lowercase letters, digits, `-` and `_`, at most 63 characters.

    >>> label_value("Digits_Run-20260101")
    'digits_run-20260101'
    """
    value = re.sub(r"[^a-z0-9_-]", "-", text.lower())
    if len(value) <= 63:
        return value
    return f"{value[:50]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def instance_name(job_id: str, attempt: int, worker: int = 0) -> str:
    """The name of one worker's VM: `[a-z]([-a-z0-9]*[a-z0-9])?`, 63 characters at most, unique per job.

    >>> instance_name("Digits_1", 3, 0)
    'spotfit-digits-1-f6ae-0003-w0'
    """
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:4]
    stem = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")[:36].rstrip("-")
    return f"spotfit-{stem}-{digest}-{attempt:04d}-w{worker}"


def labels(job_id: str, attempt: int, **extra: str) -> dict[str, str]:
    """The labels of every VM and disk an attempt creates: `spotfit gc` finds leftovers by them."""
    return {LABEL_MANAGED: "true", LABEL_JOB: label_value(job_id), LABEL_ATTEMPT: str(attempt), **extra}


def scheduling(market: Market) -> dict[str, Any]:
    """Spot VMs are deleted when preempted; no VM restarts by itself or migrates (GPUs cannot)."""
    if market == Market.SPOT:
        return {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                "onHostMaintenance": "TERMINATE", "automaticRestart": False}
    return {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE", "automaticRestart": False}


def instance_body(s: LaunchSettings, job_id: str, attempt: int, worker: int, startup_script: str) -> dict[str, Any]:
    """The instance resource of one worker."""
    zone = s.zone
    body: dict[str, Any] = {
        "name": instance_name(job_id, attempt, worker),
        "machineType": f"zones/{zone}/machineTypes/{s.machine.machine_type}",
        "labels": labels(job_id, attempt, **s.extra_labels),
        "scheduling": scheduling(s.market),
        "disks": [{
            "boot": True, "autoDelete": True,
            "initializeParams": {
                "sourceImage": f"projects/{s.image_project}/global/images/family/{s.image_family}",
                "diskSizeGb": str(s.disk_size_gib),
                "diskType": f"zones/{zone}/diskTypes/{s.disk_type}",
                "labels": labels(job_id, attempt),
            },
        }],
        "networkInterfaces": [_interface(s)],
        "metadata": {"items": [
            {"key": "startup-script", "value": startup_script},
            {"key": META_JOB, "value": job_id},
            {"key": "spotfit-worker", "value": str(worker)},
            {"key": "enable-oslogin", "value": "TRUE"},
            {"key": "block-project-ssh-keys", "value": "TRUE"},
            {"key": "install-nvidia-driver", "value": "True"},
        ]},
    }
    if s.machine.accelerator_type:
        body["guestAccelerators"] = [{
            "acceleratorType": f"zones/{zone}/acceleratorTypes/{s.machine.accelerator_type}",
            "acceleratorCount": s.machine.accelerator_count}]
    if s.service_account:
        body["serviceAccounts"] = [{"email": s.service_account, "scopes": list(s.scopes)}]
    return body


def _interface(s: LaunchSettings) -> dict[str, Any]:
    nic: dict[str, Any] = {"network": s.network}
    if s.subnetwork:
        nic["subnetwork"] = s.subnetwork
    if s.external_ip:
        nic["accessConfigs"] = [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    return nic


def insert_requests(s: LaunchSettings, job_id: str, attempt: int, startup_script: str) -> list[Insert]:
    """One `instances.insert` per worker, all in the attempt's zone (worker 0 first: the chief)."""
    check_no_secrets(startup_script)
    return [Insert(s.project, s.zone, instance_body(s, job_id, attempt, w, startup_script))
            for w in range(s.workers)]


def check_no_secrets(text: str) -> None:
    """Raise `BackendError` when `text` looks like it holds Google credentials (metadata is readable)."""
    for pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            raise BackendError(
                "Refusing to launch: the startup script would contain what looks like Google credentials "
                f"(matched {pattern.pattern!r}); instance metadata is readable from the VM and the API.",
                hint="Give the VM a service account with `gcp.service_account` instead of a key.")
