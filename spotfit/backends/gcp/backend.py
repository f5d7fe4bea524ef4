"""The `gcp` backend: each attempt is one Compute Engine VM per worker, spot or on-demand.

`launch` resolves the offer (zone from the policy's decision, machine type and GPUs from
`resources`, project from `gcp.project` or `$GOOGLE_CLOUD_PROJECT`), ships the code and settings
to the job's store as the AWS backend does, and sends `launch.insert_requests` with the official
client over REST, waiting for each zone operation. `ZONE_RESOURCE_POOL_EXHAUSTED` and
`QUOTA_EXCEEDED` become `NoCapacityError` (the VMs of the attempt already made are deleted),
which the controller answers by trying the next zone or offer.

Handles (`GcpHandle`: project, zone, VM names) are all that `status`, `stop` and `spotfit
cancel` need. VM names follow from (job, attempt, worker), so a retried insert answers
`alreadyExists` and `find` gets the VMs by name. `preempt` writes `attempts/<n>/preempt.json`
(the agent forwards it as SIGTERM) and deletes the VMs once the notice is over; `stop` deletes
them. A VM that powered itself off (`TERMINATED`) is over; a spot VM preempted by Google is
deleted by Google (`instanceTerminationAction: DELETE`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from spotfit.attempt import layout
from spotfit.backends.base import AttemptStatus, BackendTraits, LaunchOptions, LaunchRequest, LeftoverReport, Report
from spotfit.backends.gcp import client as gc
from spotfit.backends.gcp.handle import GcpHandle
from spotfit.backends.gcp.launch import Insert, LaunchSettings, insert_requests
from spotfit.backends.gcp.machines import machine_for
from spotfit.backends.gcp.spec import Gcp, gcp_options
from spotfit.errors import BackendError, NoCapacityError, UsageError
from spotfit.state.states import Market
from spotfit.stores import open_store

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

    from spotfit.backends.gcp.prices import VmPrices
    from spotfit.backends.gcp.secrets import SecretManager
    from spotfit.market.live import LiveMarket
    from spotfit.spec.job import JobSpec
    from spotfit.state.db import StateDB
    from spotfit.stores.base import ObjectStore

# Insert errors that mean "not here, not now": the policy should try another zone or offer.
CAPACITY_ERRORS = {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                   "QUOTA_EXCEEDED", "quotaExceeded", "RESOURCE_NOT_AVAILABLE"}
RUNNING_STATES = ("PROVISIONING", "STAGING", "RUNNING")
DEFAULT_REGION = "us-central1"
PROJECT_ENV = "GOOGLE_CLOUD_PROJECT"
T = TypeVar("T")


class GcpBackend(BackendTraits):
    """Run attempts on Compute Engine VMs."""

    name = "gcp"
    options = staticmethod(gcp_options)

    @staticmethod
    def boot_timeout_s(spec: JobSpec) -> float | None:
        return float(Gcp.of(spec).boot_timeout_s)

    def __init__(self, project: str | None = None, endpoint: str | None = None, credentials: Credentials | None = None,
                 allow_local_store: bool = False, operation_timeout_s: float = 300.0,
                 billing_endpoint: str | None = None, secrets_endpoint: str | None = None):
        from spotfit.backends.gcp.prices import BillingCatalog

        self.project = project
        self.secrets_endpoint = secrets_endpoint
        self.catalog = BillingCatalog(billing_endpoint, credentials)
        self.endpoint = endpoint
        self.credentials = credentials
        self.allow_local_store = allow_local_store  # tests: a file:// store the "VM" shares
        self.operation_timeout_s = operation_timeout_s
        self._clients: gc.Clients | None = None
        self._lock = threading.Lock()
        self._timers: dict[GcpHandle, threading.Timer] = {}

    def clients(self) -> gc.Clients:
        with self._lock:
            if self._clients is None:
                self._clients = gc.clients(self.endpoint, self.credentials)
            return self._clients

    # -- resolving an offer -------------------------------------------------------------------------

    def settings(self, request: LaunchRequest) -> LaunchSettings:
        """Where and how to launch `request` (pure: the catalog and the request only)."""
        opts, gcp = request.options, request.options.section_as(Gcp)
        decision = request.decision
        zone = (decision.zone if decision is not None and decision.zone else None) or request.zone \
            or next(iter(gcp.zones or ()), None) or f"{gcp.region or DEFAULT_REGION}-a"
        market = decision.market if decision is not None and decision.market is not None else request.market
        project = gcp.project or self.project or os.environ.get(PROJECT_ENV)
        if not project:
            raise UsageError("No Google Cloud project for the gcp backend: `gcp.project` is not set and neither "
                             f"is ${PROJECT_ENV}.", hint="Set `gcp.project: MY-PROJECT` in the job spec.")
        data_gib = int(opts.data.size_gib or 0)
        return LaunchSettings(
            project=project, zone=zone, market=Market(market), workers=request.workers,
            machine=machine_for(request.accelerator, request.accelerator_count, zone, gcp.machine_type),
            service_account=gcp.service_account, scopes=_scopes(opts),
            network=gcp.network or LaunchSettings.network, subnetwork=gcp.subnetwork,
            external_ip=bool(gcp.external_ip),
            image_project=gcp.image_project or LaunchSettings.image_project,
            image_family=gcp.image_family or LaunchSettings.image_family,
            disk_size_gib=int(gcp.disk_size_gib or 100) + data_gib,
            disk_type=gcp.disk_type or LaunchSettings.disk_type)

    def plan(self, request: LaunchRequest) -> list[Insert]:
        """The exact inserts `launch` would send (for `--dry-run`); nothing is created or uploaded."""
        from spotfit.backends.environment import instance_env
        from spotfit.backends.gcp.startup import startup_script

        s = self.settings(request)
        boot = instance_env(request.job_url, _image(s), request.options)
        return insert_requests(s, request.job_id, request.attempt,
                               startup_script(request.job_url, request.attempt, boot))

    def live_market(self, request: LaunchRequest, zones: list[str]) -> LiveMarket | None:
        """A `LiveMarket` of the job's machine in `zones` at the Billing Catalog's (or the bundled) prices."""
        from spotfit.backends.gcp.prices import live_prices
        from spotfit.market.live import LiveMarket

        s = self.settings(request)

        def prices() -> dict[str, VmPrices]:
            out: dict[str, VmPrices] = {}
            for zone in zones or [s.zone]:
                try:
                    machine = machine_for(request.accelerator, request.accelerator_count, zone,
                                          request.options.section_as(Gcp).machine_type)
                except UsageError:
                    continue  # the GPU is not offered there: not a zone of this market
                out[zone] = live_prices(self.catalog, machine, request.accelerator, request.accelerator_count,
                                        zone.rsplit("-", 1)[0])
            return out

        first = prices()
        priced = {z: p for z, p in first.items() if p.spot_usd_per_h is not None and p.on_demand_usd_per_h}
        if not priced:
            return None
        sources = sorted({p.source for p in priced.values()})

        def fetch(start_s: float, end_s: float) -> list[tuple[str, float, float]]:
            return [(z, start_s, float(p.spot_usd_per_h)) for z, p in prices().items()
                    if p.spot_usd_per_h is not None]

        od = min(float(p.on_demand_usd_per_h or 0) for p in priced.values())
        return LiveMarket(list(priced), 300, od, fetch, source=f"spot and on-demand from {'; '.join(sources)}")

    def preflight(self, spec: JobSpec) -> list[str]:
        """One `UsageError` for what cannot work: no project, no credentials, a zone without the GPU, no gs:// store."""
        from spotfit.backends.gcp.preflight import preflight

        return preflight(self, spec)

    def dry_run(self, path: str) -> Report:
        from spotfit.backends.gcp.dryrun import dry_run

        return dry_run(path, self)

    def shell_command(self, handle: GcpHandle, options: LaunchOptions, command: list[str]) -> list[str]:
        """`gcloud compute ssh` through IAP (the VM has no external IP), OS Login as the caller."""
        cmd = ["gcloud", "compute", "ssh", handle.instances[0], f"--project={handle.project}",
               f"--zone={handle.zone}", "--tunnel-through-iap"]
        return cmd + (["--command", " ".join(command)] if command else [])

    def port_forward_command(self, handle: GcpHandle, options: LaunchOptions, local: int,
                             remote: int) -> list[str]:
        return ["gcloud", "compute", "start-iap-tunnel", handle.instances[0], str(remote),
                f"--local-host-port=127.0.0.1:{local}", f"--project={handle.project}", f"--zone={handle.zone}"]

    # -- secrets (backends/gcp/secrets.py) ----------------------------------------------------------

    def job_project(self, spec: JobSpec) -> str:
        """The project of a job's VMs and secrets: `gcp.project`, else the backend's, else $GOOGLE_CLOUD_PROJECT."""
        project = Gcp.of(spec).project or self.project or os.environ.get(PROJECT_ENV)
        if not project:
            raise UsageError("No Google Cloud project for the gcp backend: `gcp.project` is not set and neither "
                             f"is ${PROJECT_ENV}.", hint="Set `gcp.project: MY-PROJECT` in the job spec.")
        return project

    def secret_manager(self, project: str) -> SecretManager:
        from spotfit.backends.gcp.secrets import SecretManager

        return SecretManager(project, self.secrets_endpoint, self.credentials)

    def put_job_secrets(self, job_id: str, values: dict[str, str], spec: JobSpec, store: ObjectStore) -> None:
        """Create the job's secrets in Secret Manager, and `secrets.json` (ids only) in its store."""
        from spotfit.backends.gcp.secrets import write_pointer

        project = self.job_project(spec)
        ids = _sdk_call(f"store the job's secrets in Secret Manager ({project})",
                        lambda: self.secret_manager(project).put(job_id, values))
        write_pointer(store, project, ids)

    def delete_job_secrets(self, job_id: str, spec: JobSpec) -> None:
        project = self.job_project(spec)
        _sdk_call(f"delete the job's secrets from Secret Manager ({project})",
                  lambda: self.secret_manager(project).delete_job(job_id))

    def job_secrets_region(self, spec: JobSpec) -> str:
        """Where a job's secrets live: its project (Secret Manager replicates them itself)."""
        return self.job_project(spec)

    # -- spotfit gc and market record (backends/gcp/verbs.py) -------------------------------------------

    @staticmethod
    def owns_place(place: str) -> bool:
        from spotfit.backends.gcp.verbs import owns_place

        return owns_place(place)

    def collect_leftovers(self, places: list[str] | None, keep: set[str], job: str | None, dry_run: bool,
                          ended_secrets: dict[str, str], keep_sources: set[str] | None) -> LeftoverReport:
        """VMs, disks and secrets by label (gcp makes no data snapshots: `keep_sources` is not used)."""
        from spotfit.backends.gcp.verbs import leftovers

        return leftovers(self, places, keep, job, dry_run, ended_secrets)

    def record_market(self, region: str, instance_type: str, path: str, zones: list[str] | None, hours: float,
                      gap_s: int, state: StateDB) -> Report:
        from spotfit.backends.gcp.verbs import record_live

        return record_live(self, region, instance_type, path, zones, hours, gap_s, state)

    # -- the Backend protocol -----------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> GcpHandle:
        """Launch the attempt; any SDK error becomes one `BackendError` line, with nothing left running."""
        with gc.sdk_errors(f"The gcp backend could not launch attempt {request.attempt} in "
                           f"{request.zone or 'the default zone'}",
                           hint="Check the credentials (`gcloud auth application-default login`), the "
                                "project and the Compute Engine API; docs/gcp.md lists the roles."):
            return self._launch(request)

    def _launch(self, request: LaunchRequest) -> GcpHandle:
        from spotfit.backends import environment, shipping
        from spotfit.backends.gcp.startup import startup_script

        self._check_store(request.job_url)
        s = self.settings(request)
        store = open_store(request.job_url)
        port = int(request.options.section_as(Gcp).worker_port or 2222)
        shipping.ship(store, request.attempt, request.env, s.workers, port)
        boot = environment.instance_env(request.job_url, _image(s), request.options)
        environment.upload(boot)
        inserts = insert_requests(s, request.job_id, request.attempt,
                                  startup_script(request.job_url, request.attempt, boot))
        handle = GcpHandle(project=s.project, zone=s.zone, job=request.job_id, attempt=request.attempt,
                           job_url=request.job_url, instances=tuple(i.name for i in inserts))
        try:
            for insert in inserts:
                self._insert(insert)
            if s.workers > 1:
                ips = [self._get(handle, name).network_interfaces[0].network_i_p for name in handle.instances]
                shipping.write_cluster(store, request.attempt, ips, port)
        except BaseException:
            self._delete(handle)  # a partial cluster cannot train: nothing is left running
            raise
        return handle

    def _insert(self, insert: Insert) -> None:
        where = f"{insert.body['machineType'].rsplit('/', 1)[-1]} in {insert.zone}"
        try:
            op = self.clients().instances.insert(project=insert.project, zone=insert.zone,
                                                 instance_resource=gc.instance_from_json(insert.body))
            codes = gc.operation_codes(self._wait(insert.project, insert.zone, op))
        except Exception as exc:
            codes = gc.error_codes(exc)
            if "alreadyExists" in codes:  # a retried launch: the VM of the first try
                return
            if not gc.is_api_error(exc):
                raise
            self._refused(codes, where, str(exc), exc)
        if codes:
            self._refused(codes, where, ", ".join(sorted(codes)), None)

    @staticmethod
    def _refused(codes: set[str], where: str, message: str, cause: BaseException | None) -> None:
        capacity = codes & CAPACITY_ERRORS
        if capacity:
            raise NoCapacityError(f"{sorted(capacity)[0]}: no capacity for {where} now") from cause
        raise BackendError(f"Compute Engine refused the launch of {where}: {' '.join(message.split())}",
                           hint="See docs/gcp.md for the APIs to enable, the roles and the quotas.") from cause

    def load_handle(self, text: str) -> GcpHandle:
        return GcpHandle.from_json(text)

    def find(self, request: LaunchRequest) -> GcpHandle | None:
        """The VMs a launch of `request` created, by their names; None when none exists (any more)."""
        s = self.settings(request)
        names = tuple(i.name for i in insert_requests(s, request.job_id, request.attempt, ""))
        handle = GcpHandle(project=s.project, zone=s.zone, job=request.job_id, attempt=request.attempt,
                           job_url=request.job_url, instances=names)
        found = [n for n in names if self._get(handle, n) is not None]
        return replace(handle, instances=tuple(found)) if found else None

    def status(self, handle: GcpHandle) -> AttemptStatus:
        states = [getattr(self._get(handle, n), "status", None) for n in handle.instances]
        # Several workers train together: one gone (preempted, deleted) ends the attempt for all.
        return AttemptStatus(running=bool(states) and all(st in RUNNING_STATES for st in states))

    def preempt(self, handle: GcpHandle, notice_s: float) -> None:
        _ask_to_stop(handle, notice_s)
        if notice_s <= 0:
            self._delete(handle)
            return
        timer = threading.Timer(notice_s, self._delete, args=(handle,))
        timer.daemon = True
        self._timers[handle] = timer
        timer.start()

    def stop(self, handle: GcpHandle, grace_s: float = 10.0) -> None:
        if grace_s > 0 and self.status(handle).running:
            _ask_to_stop(handle, grace_s)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self.status(handle).running:
                time.sleep(1.0)
        timer = self._timers.pop(handle, None)
        if timer is not None:
            timer.cancel()
        self._delete(handle)

    # -- steps --------------------------------------------------------------------------------------

    def _get(self, handle: GcpHandle, name: str) -> Any:
        """The VM `name`, or None when it does not exist."""
        try:
            return self.clients().instances.get(project=handle.project, zone=handle.zone, instance=name)
        except Exception as exc:
            if gc.is_not_found(exc):
                return None
            raise

    def _delete(self, handle: GcpHandle) -> None:
        """Delete the attempt's VMs (their boot disks go with them); those already gone are skipped."""
        ops = []
        for name in handle.instances:
            try:
                ops.append(self.clients().instances.delete(project=handle.project, zone=handle.zone, instance=name))
            except Exception as exc:
                if not gc.is_not_found(exc):
                    raise
        for op in ops:
            self._wait(handle.project, handle.zone, op)

    def _wait(self, project: str, zone: str, op: Any) -> Any:
        """The zone operation `op` once DONE. Polled with this backend's own client: the SDK's
        `result()` asks a client of its own, made without this endpoint (`client_options`)."""
        deadline = time.monotonic() + self.operation_timeout_s
        while not gc.is_done(op):
            if time.monotonic() > deadline:
                raise BackendError(f"Compute Engine operation {op.name} in {zone} did not finish within "
                                   f"{self.operation_timeout_s:.0f} s.", hint="Retry; `spotfit gc --cloud gcp` "
                                                                             "lists what is left.")
            op = self.clients().zone_operations.wait(project=project, zone=zone, operation=op.name)
        return op

    def _check_store(self, job_url: str) -> None:
        scheme = job_url.split("://", 1)[0]
        if scheme not in ("gs", "gcs") and not (self.allow_local_store and scheme in ("file", "memory")):
            raise UsageError(f"Invalid job store for the gcp backend: received {job_url!r}, expected a gs:// URL "
                             "that the VMs can reach.",
                             hint="Set `checkpoint.store: gs://BUCKET/PREFIX` (and `gcp.service_account`, which "
                                  "may use it) in the job spec.")


def _scopes(opts: LaunchOptions) -> tuple[str, ...]:
    """The VM's scopes; a job with secrets adds `cloud-platform`, the only scope Secret Manager accepts
    (the service account's IAM roles then decide what it may do)."""
    from spotfit.backends.gcp.secrets import SCOPE

    scopes = tuple(opts.section_as(Gcp).scopes or LaunchSettings.scopes)
    if opts.has_secrets and SCOPE not in scopes:
        scopes = tuple(s for s in scopes if s != f"{SCOPE}.read-only") + (SCOPE,)
    return scopes


def _sdk_call(what: str, call: Callable[[], T]) -> T:
    with gc.sdk_errors(f"Could not {what}", hint="Check the credentials, that the Secret Manager API is enabled "
                                                 "and that the controller has roles/secretmanager.admin "
                                                 "(docs/gcp.md#secrets)."):
        return call()


def _image(s: LaunchSettings) -> str:
    return f"projects/{s.image_project}/global/images/family/{s.image_family}"


def _ask_to_stop(handle: GcpHandle, notice_s: float) -> None:
    """`attempts/<n>/preempt.json`: the instance agent forwards it to the runtime as SIGTERM."""
    open_store(handle.job_url).write_bytes(
        layout.preempt_file(handle.attempt), json.dumps({"notice_s": notice_s, "at": time.time()}).encode())
