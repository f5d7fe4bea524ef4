"""An attempt's EC2 resources: the calls that find its VPC and create, find, watch and delete its instances.

The backend (`backend.py`) decides when; these functions only talk to EC2, each given the
client of the attempt's region. `run` turns a capacity refusal into `NoCapacityError` (the
controller tries the next zone or offer) and any other refusal into one `BackendError` line.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from spotfit.backends.aws import launch as rq
from spotfit.backends.aws.client import error_code, error_message, is_client_error
from spotfit.backends.aws.gc import cancel_spot_requests, delete_quietly
from spotfit.backends.aws.handle import AwsHandle
from spotfit.backends.aws.launch import Call, LaunchSettings
from spotfit.errors import BackendError, NoCapacityError, UsageError

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Ec2Client

# RunInstances errors that mean "not here, not now": the policy should try another offer.
CAPACITY_ERRORS = {
    "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientCapacity",
    "InsufficientReservedInstanceCapacity", "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded",
    "Unsupported",  # the type is not offered in this zone
}
LIVE_STATES = ("pending", "running", "stopping", "stopped")
ENDED_STATES = ("shutting-down", "terminated")


def vpc_id(ec2: Ec2Client, s: LaunchSettings) -> str:
    """The VPC of the launch: its `aws.subnet`'s (checked to be in the zone), else the region's default."""
    if s.subnet_id:
        subnet = ec2.describe_subnets(SubnetIds=[s.subnet_id])["Subnets"][0]
        if s.zone and subnet["AvailabilityZone"] != s.zone:
            raise UsageError(f"Invalid `aws.subnet`: {s.subnet_id} is in {subnet['AvailabilityZone']}, "
                             f"expected a subnet in {s.zone}, the zone of this attempt.",
                             hint="Leave `aws.subnet` out (default VPC) or restrict `market.zones`.")
        return cast(str, subnet["VpcId"])
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        raise BackendError(f"Region {s.region} has no default VPC.",
                           hint="Set `aws.subnet` to a subnet (with internet access) in the zone.")
    return cast(str, vpcs[0]["VpcId"])


def by_token(ec2: Ec2Client, token: str, in_states: tuple[str, ...] = LIVE_STATES) -> list[dict[str, Any]]:
    """The instances of a launch, by its client-token tag, in one of `in_states`."""
    pages = ec2.get_paginator("describe_instances").paginate(Filters=[
        {"Name": f"tag:{rq.TAG_TOKEN}", "Values": [token]},
        {"Name": "instance-state-name", "Values": list(in_states)},
    ])
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def security_group(ec2: Ec2Client, calls: list[Call]) -> str:
    """The attempt's security group: found by name (a retried launch) or created."""
    create = next(c for c in calls if c.operation == "CreateSecurityGroup")
    found = ec2.describe_security_groups(Filters=[
        {"Name": "group-name", "Values": [create.params["GroupName"]]},
        {"Name": "vpc-id", "Values": [create.params["VpcId"]]},
    ])["SecurityGroups"]
    if found:
        return cast(str, found[0]["GroupId"])
    group_id = cast(str, ec2.create_security_group(**create.params)["GroupId"])
    ingress = next((c for c in calls if c.operation == "AuthorizeSecurityGroupIngress"), None)
    if ingress is not None:
        ec2.authorize_security_group_ingress(**rq.fill(ingress.params, security_group_id=group_id))
    return group_id


def run(ec2: Ec2Client, calls: list[Call], region: str, security_group: str) -> list[dict[str, Any]]:
    """`RunInstances` (after the placement group, if any): the instances it started."""
    run = next(c for c in calls if c.operation == "RunInstances")
    zone = run.params.get("Placement", {}).get("AvailabilityZone", region)
    where = f"{run.params['InstanceType']} in {zone}"
    try:
        for call in calls:
            if call.operation == "CreatePlacementGroup":
                try:
                    ec2.create_placement_group(**call.params)
                except Exception as exc:
                    if error_code(exc) != "InvalidPlacementGroup.Duplicate":
                        raise
        instances = ec2.run_instances(**rq.fill(run.params, security_group_id=security_group))["Instances"]
        return cast(list[dict[str, Any]], instances)
    except Exception as exc:
        if not is_client_error(exc):
            raise
        code = error_code(exc)
        if code in CAPACITY_ERRORS:
            raise NoCapacityError(f"{code}: no capacity for {where} now") from exc
        message = error_message(exc)
        raise BackendError(f"EC2 refused the launch of {where}: {code}: {message}",
                           hint="See docs/aws.md for the IAM policy and the one-time setup.") from exc


def states(ec2: Ec2Client, handle: AwsHandle) -> dict[str, str]:
    """{instance id: state} of the attempt's instances ({} when EC2 no longer knows them)."""
    return states_by_id(ec2, list(handle.instances))


def states_by_id(ec2: Ec2Client, ids: list[str]) -> dict[str, str]:
    """{instance id: state} of the instances `ids` ({} when EC2 no longer knows them)."""
    if not ids:
        return {}
    try:
        pages = ec2.get_paginator("describe_instances").paginate(InstanceIds=ids)
        return {i["InstanceId"]: i["State"]["Name"]
                for page in pages for r in page["Reservations"] for i in r["Instances"]}
    except Exception as exc:
        if error_code(exc) == "InvalidInstanceID.NotFound":
            return {}
        raise


def managed_states(ec2: Ec2Client) -> dict[str, str]:
    """{instance id: state} of every instance spotfit launched in the client's region, in one paginated call."""
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:{rq.TAG_MANAGED}", "Values": ["true"]}], PaginationConfig={"PageSize": 1000})
    return {i["InstanceId"]: i["State"]["Name"] for page in pages for r in page["Reservations"] for i in r["Instances"]}


def terminate(ec2: Ec2Client, handle: AwsHandle) -> None:
    live = [i for i, st in states(ec2, handle).items() if st in LIVE_STATES]
    if live:
        ec2.terminate_instances(InstanceIds=live)


def release(ec2: Ec2Client, handle: AwsHandle, wait_s: float, poll_s: float) -> None:
    """Delete what the attempt created once its instances are gone (waiting up to `wait_s`); `spotfit gc`
    gets the rest."""
    deadline = time.monotonic() + wait_s
    while handle.instances and any(st != "terminated" for st in states(ec2, handle).values()):
        if time.monotonic() > deadline:
            return
        time.sleep(poll_s)
    cancel_spot_requests(ec2, handle.job, handle.attempt)
    if handle.placement_group:
        delete_quietly(ec2.delete_placement_group, GroupName=handle.placement_group)
    if handle.security_group:
        delete_quietly(ec2.delete_security_group, GroupId=handle.security_group)
