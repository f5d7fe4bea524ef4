"""Leftovers: find and remove what spotfit created on EC2 and no live job still uses.

Everything an attempt creates carries the tag `spotfit:managed=true` plus the job and the
attempt (see `launch.tags`). `find_leftovers` lists, in one region, the instances not yet
terminated, the open spot requests, the security groups and the placement groups so tagged,
except those of the jobs in `keep` (jobs whose controller still runs them), and the data
snapshots (`data.volume: snapshot`) that no kept job uses. `remove` terminates and cancels
first, then deletes the groups once nothing uses them, and the snapshots.

`collect_secrets` does the same for the SSM secret parameters (`/spotfit/<job id>/<NAME>`,
backends/aws/secrets.py) of jobs that ended while their controller could not delete them.

Example (against a real account: moto has no placement groups, so tests/backends run these on
moto with a placement-group stand-in):

>>> found = find_leftovers(ec2, keep={"digits-20260101-000000-ab12"})  # doctest: +SKIP
>>> remove(ec2, found)  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from spotfit.backends.aws.client import error_code, load_boto3, sdk_errors
from spotfit.backends.aws.launch import TAG_ATTEMPT, TAG_JOB, TAG_MANAGED
from spotfit.backends.aws.snapshots import delete_snapshot, unused_snapshots

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Ec2Client, Session
    from spotfit.backends.base import LeftoverReport

_MANAGED = {"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]}


@dataclass
class Leftovers:
    """Resource ids by kind, each with the job it belongs to."""

    region: str
    instances: dict[str, str] = field(default_factory=dict)
    spot_requests: dict[str, str] = field(default_factory=dict)
    security_groups: dict[str, str] = field(default_factory=dict)
    placement_groups: dict[str, str] = field(default_factory=dict)
    snapshots: dict[str, str] = field(default_factory=dict)  # data snapshots, each with its data sources

    def __len__(self) -> int:
        return (len(self.instances) + len(self.spot_requests) + len(self.security_groups)
                + len(self.placement_groups) + len(self.snapshots))

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _job(resource: dict[str, Any]) -> str:
    return next((t["Value"] for t in resource.get("Tags", []) if t["Key"] == TAG_JOB), "?")


def find_leftovers(ec2: Ec2Client, keep: set[str] | frozenset[str] = frozenset(), job: str | None = None,
                   keep_sources: set[str] | None = None) -> Leftovers:
    """Tagged resources in `ec2`'s region, minus the jobs in `keep` (only `job`'s when given).

    With `keep_sources` (the `data.source` of the kept jobs), also the data snapshots no kept job
    uses, by any of the sources tagged on them (snapshots.unused_snapshots); snapshots belong to no
    one job, so `job` leaves them out.
    """
    found = Leftovers(region=ec2.meta.region_name)
    filters = [_MANAGED] + ([{"Name": f"tag:{TAG_JOB}", "Values": [job]}] if job else [])

    def wanted(resource: dict[str, Any]) -> bool:
        return _job(resource) not in keep

    pages = ec2.get_paginator("describe_instances").paginate(Filters=filters + [
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])
    for page in pages:
        for res in page["Reservations"]:
            found.instances.update({i["InstanceId"]: _job(i) for i in res["Instances"] if wanted(i)})
    requests = ec2.describe_spot_instance_requests(Filters=filters + [
        {"Name": "state", "Values": ["open", "active"]}])["SpotInstanceRequests"]
    found.spot_requests = {r["SpotInstanceRequestId"]: _job(r) for r in requests if wanted(r)}
    groups = ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
    found.security_groups = {g["GroupId"]: _job(g) for g in groups if wanted(g)}
    placement = ec2.describe_placement_groups(Filters=filters)["PlacementGroups"]
    found.placement_groups = {g["GroupName"]: _job(g) for g in placement if wanted(g)}
    if keep_sources is not None and job is None:
        found.snapshots = unused_snapshots(ec2, keep_sources)
    return found


def remove(ec2: Ec2Client, found: Leftovers, wait_s: float = 300.0, poll_s: float = 5.0) -> dict[str, object]:
    """Terminate, cancel, then delete; returns what was removed and what is still in use."""
    if found.spot_requests:
        ec2.cancel_spot_instance_requests(SpotInstanceRequestIds=list(found.spot_requests))
    if found.instances:
        ec2.terminate_instances(InstanceIds=list(found.instances))
        _wait_terminated(ec2, list(found.instances), wait_s, poll_s)
    kept: list[str] = []
    for name in found.placement_groups:
        if not delete_quietly(ec2.delete_placement_group, GroupName=name):
            kept.append(name)
    for group_id in found.security_groups:
        if not delete_quietly(ec2.delete_security_group, GroupId=group_id):
            kept.append(group_id)
    kept += [snapshot_id for snapshot_id in found.snapshots if not delete_snapshot(ec2, snapshot_id)]
    return {"removed": found.to_json(), "still_in_use": kept}


def _wait_terminated(ec2: Ec2Client, ids: list[str], wait_s: float, poll_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        reservations = ec2.describe_instances(InstanceIds=ids)["Reservations"]
        if all(i["State"]["Name"] == "terminated" for r in reservations for i in r["Instances"]):
            return
        time.sleep(poll_s)


def cancel_spot_requests(ec2: Ec2Client, job: str, attempt: int) -> None:
    """Cancel the attempt's open spot requests (a one-time request closes on its own, usually)."""
    requests = ec2.describe_spot_instance_requests(Filters=[
        {"Name": f"tag:{TAG_JOB}", "Values": [job]}, {"Name": f"tag:{TAG_ATTEMPT}", "Values": [str(attempt)]},
        {"Name": "state", "Values": ["open", "active"]}])["SpotInstanceRequests"]
    if requests:
        ec2.cancel_spot_instance_requests(SpotInstanceRequestIds=[r["SpotInstanceRequestId"] for r in requests])


def delete_quietly(method: Callable[..., object], **params: object) -> bool:
    """Call a delete; True when the resource is gone (deleted now or already), False if in use."""
    try:
        method(**params)
    except Exception as exc:
        code = error_code(exc)
        if not code:
            raise
        if code.endswith(".NotFound") or code.endswith(".Unknown"):
            return True
        if code in ("DependencyViolation", "InvalidPlacementGroup.InUse"):
            return False
        raise
    return True


def collect(regions: list[str], keep: set[str], job: str | None = None, dry_run: bool = False,
            session: Session | None = None, keep_sources: set[str] | None = None) -> LeftoverReport:
    """Find (and unless `dry_run`, remove) leftovers in `regions`; one JSON-able report.

    `keep_sources`: the data sources of the kept jobs; given, unused data snapshots go too.
    """
    session = session or load_boto3().Session()
    regions_done: list[dict[str, object]] = []
    report: LeftoverReport = {"dry_run": dry_run, "kept_jobs": sorted(keep), "regions": regions_done}
    for region in regions:
        done = ", ".join(str(r["region"]) for r in regions_done) or "none"
        with sdk_errors(f"Could not clean up EC2 in {region}",
                        hint=f"Check the network, AWS_ENDPOINT_URL and the credentials; regions done: {done}."):
            ec2 = session.client("ec2", region_name=region)
            found = find_leftovers(ec2, keep=keep, job=job, keep_sources=keep_sources)
            entry: dict[str, object] = {"region": region, "found": found.to_json(), "count": len(found)}
            if not dry_run and len(found):
                entry["still_in_use"] = remove(ec2, found)["still_in_use"]
        regions_done.append(entry)
    return report


def collect_secrets(jobs: dict[str, str], dry_run: bool = False,
                    session: Session | None = None) -> list[dict[str, object]]:
    """The SSM secret parameters left by `jobs` ({job id: region}, ended jobs only), deleted unless `dry_run`.

    One entry per job that still has some: {"job", "region", "parameters"} (names only, never a value).
    """
    from spotfit.backends.aws import secrets

    session = session or load_boto3().Session()
    found: list[dict[str, object]] = []
    for job_id, region in sorted(jobs.items()):
        with sdk_errors(f"Could not clean up the SSM secrets of job {job_id} in {region}",
                        hint="Check the network, AWS_ENDPOINT_URL, the credentials and the IAM policy "
                             "(ssm:DescribeParameters, ssm:DeleteParameters; docs/aws.md#secrets)."):
            ssm = session.client("ssm", region_name=region)
            names = secrets.names(ssm, job_id) if dry_run else secrets.delete(ssm, job_id)
        if names:
            found.append({"job": job_id, "region": region, "parameters": names})
    return found
