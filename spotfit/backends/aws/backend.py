"""The `aws` backend: each attempt is one EC2 instance per worker, spot or on-demand.

`launch` resolves the offer (region from the zone, instance type from `aws.instance_type` or
the catalog, image from `aws.ami` or the Deep Learning AMI), ships the code and settings to the
job's store, and sends the calls `requests.launch_requests` builds: a security group of the
attempt, its inbound rules, a cluster placement group for several workers, `RunInstances`.
Capacity errors become `NoCapacityError`, which the controller records and answers by trying
the next zone or offer.

Handles (`AwsHandle`: region, instance ids, security group, placement group) are all that
`status`, `stop` and `spotfit cancel` need, in any process. `preempt` writes
`attempts/<n>/preempt.json` (the instance agent forwards it as SIGTERM) and terminates the
instances once the notice is over; `stop` terminates them and deletes what the attempt
created. A launch retried with the same (job, attempt) finds the instances of the first try by
their client-token tag instead of starting new ones, besides sending EC2's `ClientToken`; `find`
looks the same way (instances by that tag, the security group by its name) for a controller
that died inside `launch`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from spotfit.attempt import layout
from spotfit.backends.aws import access, poll
from spotfit.backends.aws import instances as instances_api
from spotfit.backends.aws import launch as rq
from spotfit.backends.aws.client import load_boto3, sdk_errors
from spotfit.backends.aws.data_volume import boot_script
from spotfit.backends.aws.disks import DEFAULT_ROOT_DEVICE, DEFAULT_ROOT_GIB
from spotfit.backends.aws.handle import AwsHandle
from spotfit.backends.aws.launch import Call, LaunchSettings
from spotfit.backends.aws.regions import DEFAULT_REGION, instance_type_for, region_of
from spotfit.backends.aws.snapshots import enable_fast_restore, planned_volume, record_source
from spotfit.backends.aws.spec import Aws, aws_options
from spotfit.backends.base import AttemptStatus, BackendTraits, LaunchRequest
from spotfit.backends.data_disk import GIB
from spotfit.errors import UsageError
from spotfit.stores import open_store

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Client, Ec2Client, Session
    from spotfit.backends.base import LaunchOptions, LeftoverReport, Report
    from spotfit.market.live import LiveMarket
    from spotfit.spec.job import JobSpec
    from spotfit.state.db import StateDB
    from spotfit.stores.base import ObjectStore

_T = TypeVar("_T")


class AwsBackend(BackendTraits):
    """Run attempts on EC2 instances."""

    name = "aws"
    options = staticmethod(aws_options)
    data_volumes = ("root", "snapshot")

    @staticmethod
    def boot_timeout_s(spec: JobSpec) -> float | None:
        return Aws.of(spec).boot_timeout_s

    def __init__(self, region: str | None = None, session: Session | None = None, allow_local_store: bool = False,
                 cleanup_wait_s: float = 300.0, poll_s: float = 5.0) -> None:
        self.region = region
        self.allow_local_store = allow_local_store  # tests: a file:// store the "instance" shares
        self.cleanup_wait_s = cleanup_wait_s
        self.poll_s = poll_s
        self._session = session
        self._clients: dict[tuple[str, str], Client] = {}
        self._lock = threading.Lock()
        self._timers: dict[AwsHandle, threading.Timer] = {}  # termination at the end of a notice

    # -- clients ----------------------------------------------------------------------------------

    def client(self, service: str, region: str) -> Client:
        with self._lock:
            if (service, region) not in self._clients:
                if self._session is None:
                    self._session = load_boto3().Session()
                self._clients[service, region] = self._session.client(service, region_name=region)
            return self._clients[service, region]

    def _poll_key(self, ec2: Ec2Client, region: str) -> poll.Key:
        """Who sees which instances: the endpoint, the region and the account's access key."""
        credentials = self._session.get_credentials() if self._session is not None else None
        return ec2.meta.endpoint_url, region, getattr(credentials, "access_key", None)

    # -- resolving an offer -------------------------------------------------------------------------

    def settings(self, request: LaunchRequest, lookup: bool = True) -> LaunchSettings:
        """Where and how to launch `request`; `lookup=False` leaves AMI and VPC as placeholders."""
        from spotfit.backends.aws.ami import resolve_ami

        opts, aws = request.options, request.options.section_as(Aws)
        region = region_of(request.zone) or aws.region or self.region or DEFAULT_REGION
        instance_type = aws.instance_type or instance_type_for(request.accelerator, request.accelerator_count, region)
        ami = aws.ami
        settings = LaunchSettings(
            region=region, zone=request.zone, instance_type=instance_type,
            image_id=ami if ami and ami.startswith("ami-") else "{image_id}",
            vpc_id=None if aws.subnet else "{vpc_id}",
            market=request.market, workers=request.workers, subnet_id=aws.subnet,
            key_name=aws.key_name, ssh_cidr=aws.ssh_cidr,
            iam_instance_profile=aws.iam_instance_profile,
            worker_port=int(aws.worker_port or 2222),
            data_bytes=int(opts.data.size_gib * GIB) if opts.data.size_gib else None,
            root_volume_gib=int(aws.root_volume_gib or DEFAULT_ROOT_GIB),
            root_device=aws.root_device or DEFAULT_ROOT_DEVICE,
        )
        rq.check_ssh_cidr(settings.ssh_cidr, settings.key_name)
        if not lookup:
            return replace(settings, data_volume=planned_volume(opts, None))
        ec2 = self.client("ec2", region)
        image = resolve_ami(ec2, self.client("ssm", region), aws.ami)
        return replace(settings, image_id=image, vpc_id=instances_api.vpc_id(ec2, settings),
                       data_volume=planned_volume(opts, ec2))

    def plan(self, request: LaunchRequest, lookup: bool = True) -> list[Call]:
        """The exact calls `launch` would send (for `--dry-run`); nothing is created."""
        from spotfit.backends.aws.userdata import user_data
        from spotfit.backends.environment import instance_env

        settings = self.settings(request, lookup=lookup)
        text = user_data(request.job_url, request.attempt,
                         instance_env(request.job_url, settings.image_id, request.options),
                         nvme_cache=settings.disk.nvme_cache, data_script=_data_script(request, settings))
        return rq.launch_requests(settings, request.job_id, request.attempt, text)

    # -- secrets (backends/aws/secrets.py) ----------------------------------------------------------

    def secrets_region(self, section: Aws, zones: list[str]) -> str:
        """Where a job's secrets live: the region of its first zone, else `aws.region`, else the default."""
        return region_of(zones[0] if zones else None) or section.region or self.region or DEFAULT_REGION

    def put_secrets(self, job_id: str, values: dict[str, str], section: Aws, zones: list[str],
                    store: ObjectStore) -> None:
        """Store the values in SSM, and in the job's store where the agents find them (names only)."""
        from spotfit.backends.aws import secrets

        region = self.secrets_region(section, zones)
        self._sdk_call(f"store the job's secrets in SSM ({region})",
                       lambda: secrets.put(self.client("ssm", region), job_id, values))
        secrets.write_pointer(store, job_id, region, sorted(values))

    def delete_secrets(self, job_id: str, section: Aws, zones: list[str]) -> None:
        from spotfit.backends.aws import secrets

        region = self.secrets_region(section, zones)
        self._sdk_call(f"delete the job's secrets from SSM ({region})",
                       lambda: secrets.delete(self.client("ssm", region), job_id))

    def put_job_secrets(self, job_id: str, values: dict[str, str], spec: JobSpec, store: ObjectStore) -> None:
        self.put_secrets(job_id, values, Aws.of(spec), list(spec.market.zones), store)

    def delete_job_secrets(self, job_id: str, spec: JobSpec) -> None:
        self.delete_secrets(job_id, Aws.of(spec), list(spec.market.zones))

    def job_secrets_region(self, spec: JobSpec) -> str:
        return self.secrets_region(Aws.of(spec), list(spec.market.zones))

    @staticmethod
    def owns_place(place: str) -> bool:
        """Whether `place` is an AWS region (us-east-1)."""
        import re

        from spotfit.backends.aws.verbs import REGION

        return re.fullmatch(REGION, place) is not None

    def collect_leftovers(self, places: list[str] | None, keep: set[str], job: str | None, dry_run: bool,
                          ended_secrets: dict[str, str], keep_sources: set[str] | None) -> LeftoverReport:
        from spotfit.backends.aws.verbs import leftovers

        return leftovers(places, keep, job, dry_run, ended_secrets, keep_sources, session=self._session)

    def record_market(self, region: str, instance_type: str, path: str, zones: list[str] | None, hours: float,
                      gap_s: int, state: StateDB) -> Report:
        from spotfit.backends.aws.verbs import record_live

        return record_live(region, instance_type, path, zones, hours, gap_s, state, session=self._session)

    @staticmethod
    def _sdk_call(what: str, call: Callable[[], _T]) -> _T:
        with sdk_errors(f"Could not {what}", hint="Check the credentials and the controller's IAM policy "
                                                  "(docs/aws.md#secrets)."):
            return call()

    def live_market(self, request: LaunchRequest, zones: list[str]) -> LiveMarket | None:
        """Live spot prices of the job's instance type in its region (a `LiveMarket`), or None."""
        from spotfit.backends.aws.prices import live_market

        s = self.settings(request, lookup=False)
        market = live_market(self.client("ec2", s.region), s.instance_type, zones)
        return market if market is not None and market.zones else None

    # -- reaching an attempt, printing the requests ---------------------------------------------------

    def shell_command(self, handle: AwsHandle, options: LaunchOptions, command: list[str]) -> list[str]:
        return access.shell_command(handle, options, command)

    def port_forward_command(self, handle: AwsHandle, options: LaunchOptions, local: int, remote: int) -> list[str]:
        return access.port_forward_command(handle, options, local, remote)

    def dry_run(self, path: str) -> Report:
        from spotfit.backends.aws.dryrun import dry_run

        return dry_run(path, self)

    # -- the Backend protocol -----------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> AwsHandle:
        """Launch the attempt; any AWS SDK error becomes one `BackendError` line, with nothing left running."""
        where = request.zone or self.region or "the default region"
        with sdk_errors(f"The aws backend could not launch attempt {request.attempt} in {where}",
                        hint="Check the credentials (`aws sts get-caller-identity`), the region and "
                             "AWS_ENDPOINT_URL; docs/aws.md lists the IAM policy."):
            return self._launch(request)

    def _launch(self, request: LaunchRequest) -> AwsHandle:
        from spotfit.backends import environment, shipping
        from spotfit.backends.aws.userdata import user_data

        self._check_store(request.job_url)
        s = self.settings(request)
        store = open_store(request.job_url)
        shipping.ship(store, request.attempt, request.env, s.workers, s.worker_port)
        boot = environment.instance_env(request.job_url, s.image_id, request.options)
        environment.upload(boot)
        ec2 = self.client("ec2", s.region)
        handle = AwsHandle(region=s.region, job=request.job_id, attempt=request.attempt, job_url=request.job_url,
                           placement_group=rq.resource_name(request.job_id, request.attempt)
                           if rq.uses_placement_group(s) else None)
        calls = rq.launch_requests(s, request.job_id, request.attempt,
                                   user_data(request.job_url, request.attempt, boot, nvme_cache=s.disk.nvme_cache,
                                             data_script=_data_script(request, s)))
        volume = s.data_volume
        if volume and volume.snapshot_id:
            record_source(ec2, volume.snapshot_id, volume.source)  # gc keeps it while this job may run
            if volume.fast_restore and s.zone:
                enable_fast_restore(ec2, volume.snapshot_id, s.zone)
        try:
            existing = instances_api.by_token(ec2, rq.client_token(request.job_id, request.attempt))
            group = instances_api.security_group(ec2, calls)
            handle = replace(handle, security_group=group)
            instances = existing or instances_api.run(ec2, calls, s.region, group)
        except Exception:
            self._release(ec2, handle)  # no instance yet: only the groups to delete
            raise
        instances.sort(key=lambda i: i.get("AmiLaunchIndex", 0))
        handle = replace(handle, instances=tuple(i["InstanceId"] for i in instances))
        if s.workers > 1:
            try:
                shipping.write_cluster(store, request.attempt, [i["PrivateIpAddress"] for i in instances],
                                       s.worker_port)
            except Exception:
                self.stop(handle, grace_s=0.0)  # the workers would wait for their addresses: end them now
                raise
        return handle

    def load_handle(self, text: str) -> AwsHandle:
        return AwsHandle.from_json(text)

    def find(self, request: LaunchRequest) -> AwsHandle | None:
        """What a launch of `request` created, in any state (terminated instances included).

        Instances are found by the attempt's client-token tag, the security group by its name.
        A handle with a security group and no instance (the launch died before `RunInstances`)
        is returned too: its attempt is then over, and `stop` deletes the group.
        """
        s = self.settings(request, lookup=False)
        ec2 = self.client("ec2", s.region)
        token = rq.client_token(request.job_id, request.attempt)
        instances = instances_api.by_token(ec2, token, instances_api.LIVE_STATES + instances_api.ENDED_STATES)
        groups = ec2.describe_security_groups(Filters=[
            {"Name": "group-name", "Values": [rq.resource_name(request.job_id, request.attempt)]}])["SecurityGroups"]
        if not instances and not groups:
            return None
        instances.sort(key=lambda i: i.get("AmiLaunchIndex", 0))
        if s.workers > 1 and instances and all(i["State"]["Name"] in instances_api.LIVE_STATES for i in instances):
            self._finish_cluster(request, s, instances)
        return AwsHandle(region=s.region, job=request.job_id, attempt=request.attempt, job_url=request.job_url,
                         instances=tuple(i["InstanceId"] for i in instances),
                         security_group=groups[0]["GroupId"] if groups else None,
                         placement_group=rq.resource_name(request.job_id, request.attempt)
                         if rq.uses_placement_group(s) else None)

    def status(self, handle: AwsHandle) -> AttemptStatus:
        # One listing of the region answers every attempt the process watches for about a pass (`poll.py`).
        ec2 = self.client("ec2", handle.region)
        states = poll.SHARED.states(self._poll_key(ec2, handle.region), ec2, list(handle.instances),
                                    instances_api.managed_states, by_id=instances_api.states_by_id)
        # Several workers train together: one gone (e.g. reclaimed) ends the attempt for all.
        running = bool(states) and len(states) == len(handle.instances) and all(
            st in ("pending", "running") for st in states.values())
        return AttemptStatus(running=running)  # the exit code comes from attempts/<n>/exit.json

    def preempt(self, handle: AwsHandle, notice_s: float) -> None:
        _ask_to_stop(handle, notice_s)
        if notice_s <= 0:
            self._terminate(handle)
            return
        timer = threading.Timer(notice_s, self._terminate, args=(handle,))
        timer.daemon = True
        self._timers[handle] = timer
        timer.start()

    def stop(self, handle: AwsHandle, grace_s: float = 10.0) -> None:
        if grace_s > 0 and self.status(handle).running:
            _ask_to_stop(handle, grace_s)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and self.status(handle).running:
                time.sleep(min(self.poll_s, 1.0))
        timer = self._timers.pop(handle, None)
        if timer is not None:
            timer.cancel()
        self._terminate(handle)
        self._release(self.client("ec2", handle.region), handle)

    def _terminate(self, handle: AwsHandle) -> None:
        ec2 = self.client("ec2", handle.region)
        instances_api.terminate(ec2, handle)
        poll.SHARED.forget(self._poll_key(ec2, handle.region))  # what this process changed is asked anew

    def _release(self, ec2: Ec2Client, handle: AwsHandle) -> None:
        instances_api.release(ec2, handle, self.cleanup_wait_s, self.poll_s)

    @staticmethod
    def _finish_cluster(request: LaunchRequest, s: LaunchSettings, instances: list[dict[str, Any]]) -> None:
        """The workers' addresses, if the launch died before it wrote them (the agents wait for them)."""
        from spotfit.backends import shipping

        store = open_store(request.job_url)
        if not store.exists(layout.cluster_file(request.attempt)):
            shipping.write_cluster(store, request.attempt, [i["PrivateIpAddress"] for i in instances], s.worker_port)

    # -- steps --------------------------------------------------------------------------------------

    def _check_store(self, job_url: str) -> None:
        scheme = job_url.split("://", 1)[0]
        if scheme != "s3" and not (self.allow_local_store and scheme in ("file", "memory")):
            # The boot script fetches the runtime with the AWS CLI, before spotfit is installed.
            raise UsageError(f"Invalid job store for the aws backend: received {job_url!r}, expected an "
                             "s3:// URL that the instances can reach.",
                             hint="Set `checkpoint.store: s3://BUCKET/PREFIX` (and the instance profile "
                                  "that may use it) in the job spec.")


def _data_script(request: LaunchRequest, s: LaunchSettings) -> str:
    """The user-data lines of the data volume (`data.volume: snapshot`) and the mount tool (`data.mode: mount`)."""
    from spotfit.backends.aws.userdata import MOUNT_TOOLS

    tools = MOUNT_TOOLS if request.options.data.mode == "mount" else ""
    return tools + boot_script(s.data_volume, s.region, request.job_id, int(request.options.data.workers or 16))


def _ask_to_stop(handle: AwsHandle, notice_s: float) -> None:
    """`attempts/<n>/preempt.json`: the instance agent forwards it to the runtime as SIGTERM."""
    open_store(handle.job_url).write_bytes(
        layout.preempt_file(handle.attempt),
        json.dumps({"notice_s": notice_s, "at": time.time()}).encode())
