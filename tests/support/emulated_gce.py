"""An emulated Compute Engine on 127.0.0.1 whose VMs run their real startup script.

- **Compute Engine API**: `GceApi` (tests/support/gce_api.py), which the controller's official
  client reaches through `SPOTFIT_GCP_ENDPOINT` (see `controller_env`).
- **GCS**: gcp-storage-emulator (the tests' `gcs` fixture), for the job's store and the env cache.
- **Metadata server**: one `MetadataServer` per VM (tests/support/gce_metadata.py).
- **Cloud Billing Catalog**: `BillingApi` (tests/support/billing_api.py) with the SKUs of an
  n1-standard-8 and a V100: the controller's live prices (`SPOTFIT_GCP_BILLING_ENDPOINT`).
- **Secret Manager**: `SecretManagerApi` (tests/support/secret_manager.py), for the controller
  (anonymously) and the VMs (`SPOTFIT_GCP_SECRETS_ENDPOINT`), which read values with the token
  their metadata server hands out as the service account's (`instance/service-accounts/default/token`).
- **The VM**: for each VM the API reports `RUNNING`, the harness takes its `startup-script`
  metadata item and runs it in a sandbox folder of its own, as the AWS harness runs user-data
  (tests/support/sandbox.py: `HOME`, `PATH` and the install root redirected; the image's
  `python3.11` and `shutdown` stood in for; pip offline), with `SPOTFIT_METADATA_URL` at its
  metadata server and `gcloud` on its `PATH` (`gcloud storage cp` against the GCS emulator, with
  gcsfs). After `shutdown` the harness marks the VM `TERMINATED`, as a guest-initiated power-off does.
- **Preemption**: `interrupt(name, notice_s)` sets `instance/preempted` to TRUE in the VM's
  metadata server, makes its zone answer `ZONE_RESOURCE_POOL_EXHAUSTED` from then on, and
  deletes the VM when the notice is over (`instanceTerminationAction: DELETE`), if it is still
  there. `EmulatedGcpBackend` delivers the controller's injected preemptions this way.

A deleted or terminated VM's processes are killed. What this does not model: boot time, a real
TensorFlow install, the VM's service account beyond Secret Manager's one token (the sandbox
reaches GCS anonymously), several VMs on one private network.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotfit.backends.gcp.backend import GcpBackend
from tests.support.billing_api import BillingApi, n1_v100_skus
from tests.support.gce_api import GceApi
from tests.support.gce_metadata import MetadataServer
from tests.support.gcs import GcsEmulator
from tests.support.sandbox import Harness, Machine, boot, kill, prepare
from tests.support.secret_manager import SecretManagerApi

PROJECT = "spotfit-emulated"

_GCLOUD_STUB = """#!{python}
# Stands in for the Google Cloud CLI: `gcloud storage cp [--quiet] SRC DST`, SRC or DST a gs:// URL.
import sys
import gcsfs
args = [a for a in sys.argv[1:] if a != "--quiet"]
if args[:2] != ["storage", "cp"] or len(args) != 4:
    sys.exit(f"gcloud stub: unsupported command {{sys.argv[1:]}}")
src, dst = args[2:]
fs = gcsfs.GCSFileSystem(token="anon")
try:
    if src.startswith("gs://"):
        if dst.endswith("/"):
            dst += src.rsplit("/", 1)[1]
        fs.get(src, dst)
    else:
        fs.put(src, dst)
except FileNotFoundError as exc:
    sys.exit(f"ERROR: (gcloud.storage.cp) {{exc}}")
"""

@dataclass
class Vm(Machine):
    """One emulated VM: its sandbox, metadata server and the bash process running its startup script."""

    name: str
    zone: str
    folder: Path
    metadata: MetadataServer
    proc: Any
    ended: bool = False


@dataclass
class EmulatedGce(Harness):
    """Compute Engine API + GCS + metadata servers + sandboxes (see the module doc); `start()`, then `stop()`."""

    folder: Path
    gcs: GcsEmulator
    vms: dict[str, Vm] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def start(self) -> EmulatedGce:
        self.api = GceApi()
        self.billing = BillingApi(n1_v100_skus(["us-central1", "us-east1", "europe-west4"]))
        self.secret_manager = SecretManagerApi()
        self._start_harness()
        return self

    def controller_env(self) -> dict[str, str]:
        """The controller's environment: Compute Engine at the emulator, gs:// at the GCS emulator."""
        return {**self.gcs.env(), "SPOTFIT_GCP_ENDPOINT": self.api.url, "GOOGLE_CLOUD_PROJECT": PROJECT,
                "SPOTFIT_GCP_BILLING_ENDPOINT": self.billing.url,
                "SPOTFIT_GCP_SECRETS_ENDPOINT": self.secret_manager.url}

    def backend(self) -> EmulatedGcpBackend:
        return EmulatedGcpBackend(self, project=PROJECT, endpoint=self.api.url, operation_timeout_s=60,
                                  billing_endpoint=self.billing.url, secrets_endpoint=self.secret_manager.url)

    def interrupt(self, name: str, notice_s: float) -> None:
        """A preemption: the notice in the metadata server, the zone's capacity gone, deletion after `notice_s`."""
        vm = self.vms[name]
        self.api.fail_inserts(vm.zone, "ZONE_RESOURCE_POOL_EXHAUSTED")
        vm.metadata.preempt()
        self._later(notice_s, self._reclaim, name)

    def stop(self) -> None:
        self._stop_harness()
        for vm in self.vms.values():
            kill(vm.proc)
            vm.metadata.stop()
        self.api.stop()
        self.billing.stop()
        self.secret_manager.stop()

    # -- the VMs' side ------------------------------------------------------------------------------

    def _tick(self) -> None:
        live = {vm["name"]: vm for vm in self.api.live()}
        for name, vm in live.items():
            if vm["status"] == "RUNNING" and name not in self.vms:
                self.vms[name] = self._boot(vm)
        for name, booted in self.vms.items():
            if name not in live or live[name]["status"] == "TERMINATED":
                kill(booted.proc)  # the machine is gone, and what ran on it
            if not booted.ended and booted.proc.poll() is not None:
                booted.ended = True
                if booted.powered_off and name in live:
                    self.api.power_off(name)

    def _reclaim(self, name: str) -> None:
        if any(vm["name"] == name for vm in self.api.live()):
            self.api.preempt(name)

    def _boot(self, vm: dict) -> Vm:
        name, zone = vm["name"], vm["zone"]
        folder = self.folder / name
        prepare(folder, {"gcloud": _GCLOUD_STUB.format(python=sys.executable)})
        items = {i["key"]: i["value"] for i in vm["metadata"]["items"]}
        metadata = MetadataServer(name, zone, vm["networkInterfaces"][0]["networkIP"],
                                  attributes={k: v for k, v in items.items() if k != "startup-script"})
        metadata.docs["/computeMetadata/v1/instance/service-accounts/default/token"] = json.dumps(
            {"access_token": self.secret_manager.reader_token, "expires_in": 3599, "token_type": "Bearer"})
        env = {**self.gcs.env(), "SPOTFIT_METADATA_URL": metadata.url,
               "SPOTFIT_GCP_SECRETS_ENDPOINT": self.secret_manager.url}
        proc = boot(folder, "startup-script", items["startup-script"].encode(), env, self.wheels)
        return Vm(name, zone, folder, metadata, proc)


class EmulatedGcpBackend(GcpBackend):
    """The gcp backend, except that an injected preemption arrives as Google delivers one."""

    def __init__(self, cloud: EmulatedGce, **kwargs: Any):
        super().__init__(**kwargs)
        self.cloud = cloud

    def preempt(self, handle: Any, notice_s: float) -> None:
        deadline = time.monotonic() + 30
        while any(n not in self.cloud.vms for n in handle.instances) and time.monotonic() < deadline:
            time.sleep(0.1)  # the harness boots a VM within a tick of its insert
        for name in handle.instances:
            self.cloud.interrupt(name, notice_s)
