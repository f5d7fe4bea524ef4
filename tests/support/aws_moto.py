"""Shared pieces of the AWS backend tests: moto in-process, and what moto does not model.

- `moto_session()`: a boto3 session whose calls moto answers in-process (`mock_aws`); nothing
  leaves this machine and no metadata address is contacted.
- `PlacementGroups`: moto 5.2 does not implement placement groups, so these tests answer
  Create/Describe/DeletePlacementGroup from a small in-memory table (botocore `before-call`
  hooks) and record the calls.
- `Calls`: records the parameters of every EC2 call, e.g. `Placement.GroupName`, which moto
  accepts but drops.
- `fail_run_instances(session, zone, code)`: makes `RunInstances` in `zone` fail with an EC2
  error code, e.g. `InsufficientInstanceCapacity`, which moto never raises by itself.
- `publish_spot_prices(session, instance_type, prices)`: `DescribeSpotPriceHistory` answers
  with the given prices (moto's history is placeholder data: $0.00001/h for a few CPU types).
- `aws_backend(aws)`, `launch_request(url, ...)`: the backend under test and a request to it.

The fixtures `aws` (moto, in tests/backends/conftest.py) and `job` (a job prefix with its
runtime.json) build on these.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime

import boto3
from botocore.exceptions import ClientError

from spotfit.backends.aws.backend import AwsBackend
from spotfit.backends.aws.spec import Aws
from spotfit.backends.base import LaunchRequest
from tests.support.launch_options import launch_options

REGION = "us-west-2"
AMI = "ami-12c6146b"  # one of moto's bundled images


@dataclass
class _Http:
    status_code: int = 200
    headers: dict | None = None


class Calls:
    """Every EC2 call's API parameters, in order (thread-safe)."""

    def __init__(self, session: boto3.Session):
        self.log: list[tuple[str, dict]] = []
        self._lock = threading.Lock()
        session.events.register("provide-client-params.ec2", self._record)

    def _record(self, params, model, **_):
        with self._lock:
            self.log.append((model.name, dict(params)))

    def of(self, operation: str) -> list[dict]:
        with self._lock:
            return [p for op, p in self.log if op == operation]


class PlacementGroups:
    """An in-memory stand-in for EC2 placement groups (moto does not implement them)."""

    def __init__(self, session: boto3.Session):
        self.groups: dict[str, dict] = {}
        self._pending = threading.local()
        session.events.register("provide-client-params.ec2.CreatePlacementGroup", self._keep)
        session.events.register("provide-client-params.ec2.DeletePlacementGroup", self._keep)
        session.events.register("provide-client-params.ec2.DescribePlacementGroups", self._keep)
        session.events.register("before-call.ec2.CreatePlacementGroup", self._create)
        session.events.register("before-call.ec2.DeletePlacementGroup", self._delete)
        session.events.register("before-call.ec2.DescribePlacementGroups", self._describe)

    def _keep(self, params, **_):
        self._pending.params = dict(params)

    def _create(self, **_):
        p = self._pending.params
        if p["GroupName"] in self.groups:
            raise ClientError({"Error": {"Code": "InvalidPlacementGroup.Duplicate", "Message": "exists"}},
                              "CreatePlacementGroup")
        tags = [t for spec in p.get("TagSpecifications", []) for t in spec["Tags"]]
        self.groups[p["GroupName"]] = {"GroupName": p["GroupName"], "Strategy": p["Strategy"],
                                       "State": "available", "Tags": tags}
        return _Http(), {"PlacementGroup": self.groups[p["GroupName"]]}

    def _delete(self, **_):
        name = self._pending.params["GroupName"]
        if self.groups.pop(name, None) is None:
            raise ClientError({"Error": {"Code": "InvalidPlacementGroup.Unknown", "Message": name}},
                              "DeletePlacementGroup")
        return _Http(), {}

    def _describe(self, **_):
        wanted = {f["Name"][4:]: set(f["Values"]) for f in self._pending.params.get("Filters", [])
                  if f["Name"].startswith("tag:")}

        def match(group):
            tags = {t["Key"]: t["Value"] for t in group["Tags"]}
            return all(tags.get(k) in v for k, v in wanted.items())

        return _Http(), {"PlacementGroups": [g for g in self.groups.values() if match(g)]}


def fail_run_instances(session: boto3.Session, zone: str, code: str = "InsufficientInstanceCapacity") -> None:
    """`RunInstances` placed in `zone` fails with `code`, as EC2 answers when it has no capacity."""
    def check(params, **_):
        if params.get("Placement", {}).get("AvailabilityZone") == zone:
            raise ClientError({"Error": {"Code": code, "Message": f"We currently do not have sufficient "
                                                                  f"capacity in the Availability Zone {zone}."}},
                              "RunInstances")

    events = session.meta.events if hasattr(session, "meta") else session.events
    events.register("provide-client-params.ec2.RunInstances", check)


def publish_spot_prices(session: boto3.Session, instance_type: str,
                        prices: dict[str, list[tuple[datetime, float]]]) -> None:
    """`DescribeSpotPriceHistory` of `instance_type` answers with `prices` (zone -> [(time, $/h)])."""
    def describe(**_):
        records = [{"AvailabilityZone": zone, "InstanceType": instance_type, "ProductDescription": "Linux/UNIX",
                    "SpotPrice": f"{price:.4f}", "Timestamp": stamp}
                   for zone, points in prices.items() for stamp, price in points]
        return _Http(), {"SpotPriceHistory": records, "NextToken": ""}

    session.events.register("before-call.ec2.DescribeSpotPriceHistory", describe)


def moto_session() -> boto3.Session:
    return boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                         aws_session_token="testing", region_name=REGION)


def instances(ec2, job: str) -> list[dict]:
    """Every instance tagged with `job`, whatever its state."""
    pages = ec2.describe_instances(Filters=[{"Name": "tag:spotfit:job", "Values": [job]}])
    return [i for r in pages["Reservations"] for i in r["Instances"]]


@dataclass
class MotoAws:
    session: boto3.Session
    calls: Calls
    placement_groups: PlacementGroups
    ec2: object


def aws_backend(aws: MotoAws) -> AwsBackend:
    """The aws backend on moto's session, quick to poll, allowed a file:// job store."""
    return AwsBackend(session=aws.session, allow_local_store=True, cleanup_wait_s=5.0, poll_s=0.01)


def launch_request(url: str, attempt: int = 1, zone: str | None = "us-west-2b", workers: int = 1,
                   **options) -> LaunchRequest:
    """Attempt `attempt` of job-1 on spot V100 in `zone`, with MY_FLAG=1 in its environment."""
    return LaunchRequest(job_id="job-1", attempt=attempt, job_url=url, zone=zone, market="spot",
                         workers=workers, env={"MY_FLAG": "1"}, accelerator="V100",
                         options=launch_options(Aws, ami=AMI, **options))


class FastRestores:
    """An in-memory stand-in for fast snapshot restore (moto 5.2 does not implement it): {snapshot id: zones}."""

    def __init__(self, session: boto3.Session):
        self.enabled: dict[str, set[str]] = {}
        self._pending = threading.local()
        for op in ("EnableFastSnapshotRestores", "DisableFastSnapshotRestores", "DescribeFastSnapshotRestores"):
            session.events.register(f"provide-client-params.ec2.{op}", self._keep)
            session.events.register(f"before-call.ec2.{op}", getattr(self, f"_{op[:4].lower()}"))

    def _keep(self, params, **_):
        self._pending.params = dict(params)

    def _enab(self, **_):
        p = self._pending.params
        for snap in p["SourceSnapshotIds"]:
            self.enabled.setdefault(snap, set()).update(p["AvailabilityZones"])
        return _Http(), {"Successful": [], "Unsuccessful": []}

    def _disa(self, **_):
        p = self._pending.params
        for snap in p["SourceSnapshotIds"]:
            self.enabled[snap] = self.enabled.get(snap, set()) - set(p["AvailabilityZones"])
        return _Http(), {"Successful": [], "Unsuccessful": []}

    def _desc(self, **_):
        wanted = {v for f in self._pending.params.get("Filters", []) for v in f["Values"]}
        rows = [{"SnapshotId": s, "AvailabilityZone": z, "State": "enabled"}
                for s, zones in self.enabled.items() if s in wanted for z in sorted(zones)]
        return _Http(), {"FastSnapshotRestores": rows}
