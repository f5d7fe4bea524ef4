"""The exact EC2 requests of one attempt, built as plain dicts (pure: no boto3, no network).

`launch_requests` returns the ordered calls the backend sends for an attempt — security
group, its inbound rules, a cluster placement group when several workers can use one, and
`RunInstances` — so that `spotfit run --backend aws --dry-run` prints exactly what `launch`
would send. Values known only after an earlier call (the new security group's id) appear as
placeholders such as `"{security_group_id}"`, filled in by `fill`.

Safe defaults, on purpose: no inbound rule open to the world; SSH only from one address
(`/32` or `/128`) and only with a key pair — without one there is no SSH at all (use SSM);
the workers' port open only to members of the job's own security group; IMDSv2 required;
the instance terminates itself when it shuts down; tags name the job and the attempt; a
client token derived from (job, attempt) makes a retried launch idempotent. The root volume
is sized for the dataset (`BlockDeviceMappings`, gp3) unless the instance type has
instance-store NVMe, which then holds the data cache (`disks.py`); with `data.volume: snapshot`
a data volume holds it instead, made from the data's snapshot when one exists (`data_volume.py`).

Example:

>>> s = LaunchSettings(region="us-west-2", zone="us-west-2b", instance_type="p3.2xlarge",
...                    image_id="ami-0123", market="spot", workers=1)
>>> calls = launch_requests(s, "job-1", 3, user_data="#!/bin/bash")
>>> [c.operation for c in calls]
['CreateSecurityGroup', 'RunInstances']
>>> calls[-1].params["InstanceMarketOptions"]["SpotOptions"]["SpotInstanceType"]
'one-time'
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass, field
from typing import Any

from spotfit.backends.aws.data_volume import DataVolume
from spotfit.backends.aws.disks import DEFAULT_ROOT_DEVICE, DEFAULT_ROOT_GIB, DiskPlan, disk_plan
from spotfit.errors import UsageError
from spotfit.state.states import Market

TAG_JOB = "spotfit:job"
TAG_ATTEMPT = "spotfit:attempt"
TAG_TOKEN = "spotfit:client-token"
TAG_MANAGED = "spotfit:managed"
SG_ID = "{security_group_id}"  # placeholder: the id CreateSecurityGroup returns

# Families that cannot join a cluster placement group (burstable and Mac instances).
_NO_CLUSTER_PREFIXES = ("t2.", "t3.", "t3a.", "t4g.", "mac1.", "mac2.")


@dataclass(frozen=True)
class Call:
    """One EC2 API call: the operation name and its exact parameters."""

    operation: str
    params: dict[str, Any]

    def to_json(self) -> dict[str, object]:
        return {"operation": self.operation, "params": self.params}


@dataclass(frozen=True)
class LaunchSettings:
    """Where and how to launch, resolved from the offer and the spec's `aws:` section."""

    region: str
    zone: str | None
    instance_type: str
    image_id: str
    market: Market
    workers: int = 1
    vpc_id: str | None = None
    subnet_id: str | None = None
    key_name: str | None = None
    ssh_cidr: str | None = None
    iam_instance_profile: str | None = None
    worker_port: int = 2222
    extra_tags: dict[str, str] = field(default_factory=dict)
    data_bytes: int | None = None  # the dataset's size (`data.size_gib`), None when not given
    root_volume_gib: int = DEFAULT_ROOT_GIB
    root_device: str = DEFAULT_ROOT_DEVICE
    data_volume: DataVolume | None = None  # `data.volume: snapshot`: the cache's own volume (data_volume.py)

    @property
    def disk(self) -> DiskPlan:
        """The root volume sized for the data, or the instance-store NVMe for the cache (disks.py).

        With a data volume, the root stays the image's and no NVMe is used: the data volume holds the cache.
        """
        if self.data_volume is not None:
            return DiskPlan()
        return disk_plan(self.data_bytes, self.instance_type, self.root_volume_gib, self.root_device)


def client_token(job_id: str, attempt: int) -> str:
    """The idempotency token of an attempt (EC2 allows 64 ASCII characters)."""
    digest = hashlib.sha256(f"{job_id}/{attempt}".encode()).hexdigest()[:40]
    return f"spotfit-{digest}"


def resource_name(job_id: str, attempt: int) -> str:
    """Name of the attempt's security group and placement group (255 characters at most)."""
    return f"spotfit-{job_id}-{attempt:04d}"[:255]


def tags(job_id: str, attempt: int, **extra: str) -> list[dict[str, str]]:
    """The tags of every resource an attempt creates: `spotfit gc` finds leftovers by them."""
    base = {TAG_MANAGED: "true", TAG_JOB: job_id, TAG_ATTEMPT: str(attempt),
            "Name": resource_name(job_id, attempt), **extra}
    return [{"Key": k, "Value": v} for k, v in base.items()]


def check_ssh_cidr(cidr: str | None, key_name: str | None) -> None:
    """SSH only from one address and with a key pair; never from the world."""
    if cidr is None:
        return
    try:
        net = ipaddress.ip_network(cidr, strict=True)
    except ValueError:
        raise UsageError(f"Invalid `aws.ssh_cidr`: received {cidr!r}, expected your own address as "
                         "a /32 (IPv4) or /128 (IPv6) network, e.g. 203.0.113.7/32.",
                         hint="Find your address with `curl https://checkip.amazonaws.com`.") from None
    if net.num_addresses != 1:
        raise UsageError(f"Invalid `aws.ssh_cidr`: received {cidr!r}, expected a single address "
                         "(/32 or /128): spotfit never opens SSH to a range or to the world.",
                         hint="Use your own address, e.g. 203.0.113.7/32, or leave SSH off and use SSM.")
    if not key_name:
        raise UsageError(f"Invalid `aws.ssh_cidr`: received {cidr!r} without `aws.key_name`; SSH is "
                         "opened only with a key pair (passwords are never used).",
                         hint="Set `aws.key_name` to an EC2 key pair, or remove `aws.ssh_cidr` (SSM).")


def supports_cluster_placement(instance_type: str) -> bool:
    """Whether `instance_type` may join a cluster placement group."""
    return not instance_type.startswith(_NO_CLUSTER_PREFIXES)


def uses_placement_group(settings: LaunchSettings) -> bool:
    return settings.workers > 1 and supports_cluster_placement(settings.instance_type)


def security_group_request(s: LaunchSettings, job_id: str, attempt: int) -> Call:
    params: dict[str, Any] = {
        "GroupName": resource_name(job_id, attempt),
        "Description": f"spotfit job {job_id} attempt {attempt}: no inbound from the world",
        "TagSpecifications": [{"ResourceType": "security-group", "Tags": tags(job_id, attempt)}],
    }
    if s.vpc_id:
        params["VpcId"] = s.vpc_id
    return Call("CreateSecurityGroup", params)


def ingress_request(s: LaunchSettings, group_id: str = SG_ID) -> Call | None:
    """Inbound rules: SSH from the caller's address (with a key pair), workers among themselves."""
    check_ssh_cidr(s.ssh_cidr, s.key_name)
    rules = []
    if s.ssh_cidr:
        net = ipaddress.ip_network(s.ssh_cidr)
        ranges = ("Ipv6Ranges", "CidrIpv6") if net.version == 6 else ("IpRanges", "CidrIp")
        rules.append({"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                      ranges[0]: [{ranges[1]: str(net), "Description": "SSH from the caller only"}]})
    if s.workers > 1:
        rules.append({"IpProtocol": "tcp", "FromPort": s.worker_port, "ToPort": s.worker_port,
                      "UserIdGroupPairs": [{"GroupId": group_id,
                                            "Description": "TF workers, only inside this group"}]})
    if not rules:
        return None
    return Call("AuthorizeSecurityGroupIngress", {"GroupId": group_id, "IpPermissions": rules})


def placement_group_request(job_id: str, attempt: int) -> Call:
    return Call("CreatePlacementGroup", {
        "GroupName": resource_name(job_id, attempt),
        "Strategy": "cluster",
        "TagSpecifications": [{"ResourceType": "placement-group", "Tags": tags(job_id, attempt)}],
    })


def run_instances_request(s: LaunchSettings, job_id: str, attempt: int, user_data: str,
                          group_id: str = SG_ID) -> Call:
    """`RunInstances` for every worker of the attempt, in one zone, in one request."""
    token = client_token(job_id, attempt)
    params: dict[str, Any] = {
        "ImageId": s.image_id,
        "InstanceType": s.instance_type,
        "MinCount": s.workers,  # all workers or none: a partial cluster cannot train
        "MaxCount": s.workers,
        "ClientToken": token,
        "UserData": user_data,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled",
                            "HttpPutResponseHopLimit": 1, "InstanceMetadataTags": "disabled"},
        "TagSpecifications": [
            {"ResourceType": kind, "Tags": tags(job_id, attempt, **{TAG_TOKEN: token}, **s.extra_tags)}
            for kind in ("instance", "volume") + (("spot-instances-request",) if s.market == Market.SPOT else ())
        ],
    }
    placement: dict[str, str] = {}
    if s.zone:
        placement["AvailabilityZone"] = s.zone
    if uses_placement_group(s):
        placement["GroupName"] = resource_name(job_id, attempt)
    if placement:
        params["Placement"] = placement
    if s.subnet_id:
        params["NetworkInterfaces"] = [{"DeviceIndex": 0, "SubnetId": s.subnet_id, "Groups": [group_id],
                                        "AssociatePublicIpAddress": True, "DeleteOnTermination": True}]
    else:
        params["SecurityGroupIds"] = [group_id]
    if s.market == Market.SPOT:
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    mappings = s.disk.block_device_mappings + ([s.data_volume.mapping] if s.data_volume else [])
    if mappings:
        params["BlockDeviceMappings"] = mappings
    if s.key_name:
        params["KeyName"] = s.key_name
    if s.iam_instance_profile:
        key = "Arn" if s.iam_instance_profile.startswith("arn:") else "Name"
        params["IamInstanceProfile"] = {key: s.iam_instance_profile}
    return Call("RunInstances", params)


def launch_requests(s: LaunchSettings, job_id: str, attempt: int, user_data: str) -> list[Call]:
    """Every call of one launch, in order (placeholders for ids not known yet)."""
    calls = [security_group_request(s, job_id, attempt)]
    ingress = ingress_request(s)
    if ingress is not None:
        calls.append(ingress)
    if uses_placement_group(s):
        calls.append(placement_group_request(job_id, attempt))
    calls.append(run_instances_request(s, job_id, attempt, user_data))
    return calls


def fill(value: Any, **ids: str) -> Any:
    """`value` with placeholders such as `{security_group_id}` replaced by real ids."""
    if isinstance(value, dict):
        return {k: fill(v, **ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, **ids) for v in value]
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in ids:
        return ids[value[1:-1]]
    return value
