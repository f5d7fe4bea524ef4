"""The EC2 requests of an attempt (pure builders): market, zone, tags, IMDSv2, security rules."""

from __future__ import annotations

import ipaddress

import pytest

from spotfit.backends.aws import launch as rq
from spotfit.backends.aws.userdata import check_no_secrets, user_data
from spotfit.backends.base import LaunchOptions, backend_options
from spotfit.backends.environment import instance_env
from spotfit.backends.wheel import running_wheel
from spotfit.errors import BackendError, SpecError, UsageError
from spotfit.spec.job import parse_spec


def _settings(**kw) -> rq.LaunchSettings:
    base = dict(region="us-west-2", zone="us-west-2b", instance_type="p3.2xlarge", image_id="ami-1",
                market="spot", vpc_id="vpc-1")
    return rq.LaunchSettings(**{**base, **kw})


def _by_op(calls):
    return {c.operation: c.params for c in calls}


def test_spot_launch_is_one_time_in_the_zone_tagged_imdsv2_and_self_terminating():
    ops = _by_op(rq.launch_requests(_settings(), "job-1", 2, "#!/bin/bash\n"))
    run = ops["RunInstances"]
    assert run["InstanceMarketOptions"] == {"MarketType": "spot", "SpotOptions": {
        "SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
    assert run["Placement"] == {"AvailabilityZone": "us-west-2b"}
    assert run["MinCount"] == run["MaxCount"] == 1
    assert run["MetadataOptions"]["HttpTokens"] == "required"
    assert run["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert run["SecurityGroupIds"] == [rq.SG_ID]
    assert "KeyName" not in run
    tags = {t["Key"]: t["Value"] for t in run["TagSpecifications"][0]["Tags"]}
    assert tags[rq.TAG_JOB] == "job-1" and tags[rq.TAG_ATTEMPT] == "2" and tags[rq.TAG_MANAGED] == "true"
    assert tags[rq.TAG_TOKEN] == run["ClientToken"]
    kinds = {spec["ResourceType"] for spec in run["TagSpecifications"]}
    assert kinds == {"instance", "volume", "spot-instances-request"}


def test_client_token_is_stable_per_attempt_and_fits_ec2():
    token = rq.client_token("job-1", 2)
    assert token == rq.client_token("job-1", 2) != rq.client_token("job-1", 3)
    assert len(token) <= 64 and token.isascii()


def test_on_demand_has_no_market_options():
    run = _by_op(rq.launch_requests(_settings(market="on_demand"), "j", 1, ""))["RunInstances"]
    assert "InstanceMarketOptions" not in run
    assert {s["ResourceType"] for s in run["TagSpecifications"]} == {"instance", "volume"}


def _world_open(permission: dict) -> bool:
    return any(ipaddress.ip_network(r.get("CidrIp") or r.get("CidrIpv6")).num_addresses > 1
               for r in permission.get("IpRanges", []) + permission.get("Ipv6Ranges", []))


def test_no_inbound_rule_at_all_without_ssh_and_with_one_worker():
    ops = _by_op(rq.launch_requests(_settings(), "j", 1, ""))
    assert "AuthorizeSecurityGroupIngress" not in ops


def test_ssh_only_from_the_callers_address_and_only_with_a_key_pair():
    ops = _by_op(rq.launch_requests(_settings(key_name="me", ssh_cidr="203.0.113.7/32"), "j", 1, ""))
    [rule] = ops["AuthorizeSecurityGroupIngress"]["IpPermissions"]
    assert (rule["FromPort"], rule["ToPort"]) == (22, 22)
    assert rule["IpRanges"][0]["CidrIp"] == "203.0.113.7/32"
    assert ops["RunInstances"]["KeyName"] == "me"
    for bad in ("0.0.0.0/0", "203.0.113.0/24", "::/0", "not-an-address"):
        with pytest.raises(UsageError, match="ssh_cidr"):
            rq.launch_requests(_settings(key_name="me", ssh_cidr=bad), "j", 1, "")
    with pytest.raises(UsageError, match="key pair"):
        rq.launch_requests(_settings(ssh_cidr="203.0.113.7/32"), "j", 1, "")


def test_workers_talk_only_inside_the_group_and_share_a_cluster_placement_group():
    calls = rq.launch_requests(_settings(workers=2), "j", 1, "")
    ops = _by_op(calls)
    assert [c.operation for c in calls] == ["CreateSecurityGroup", "AuthorizeSecurityGroupIngress",
                                             "CreatePlacementGroup", "RunInstances"]
    [rule] = ops["AuthorizeSecurityGroupIngress"]["IpPermissions"]
    assert rule["FromPort"] == rule["ToPort"] == 2222
    assert rule["UserIdGroupPairs"] == [{"GroupId": rq.SG_ID, "Description": "TF workers, only inside this group"}]
    assert not _world_open(rule)
    assert ops["CreatePlacementGroup"]["Strategy"] == "cluster"
    assert ops["RunInstances"]["Placement"]["GroupName"] == ops["CreatePlacementGroup"]["GroupName"]
    assert ops["RunInstances"]["MinCount"] == ops["RunInstances"]["MaxCount"] == 2


def test_no_cluster_placement_for_types_that_cannot_join_one():
    ops = _by_op(rq.launch_requests(_settings(workers=2, instance_type="t3.large"), "j", 1, ""))
    assert "CreatePlacementGroup" not in ops and "GroupName" not in ops["RunInstances"]["Placement"]


def test_subnet_launch_puts_the_group_on_the_interface():
    run = _by_op(rq.launch_requests(_settings(subnet_id="subnet-1"), "j", 1, ""))["RunInstances"]
    assert run["NetworkInterfaces"][0]["SubnetId"] == "subnet-1"
    assert run["NetworkInterfaces"][0]["Groups"] == [rq.SG_ID]
    assert "SecurityGroupIds" not in run


def test_fill_replaces_placeholders_only():
    params = {"GroupId": rq.SG_ID, "Other": ["{security_group_id}", "{kept}"]}
    assert rq.fill(params, security_group_id="sg-9") == {"GroupId": "sg-9", "Other": ["sg-9", "{kept}"]}


def test_user_data_installs_the_shipped_wheel_runs_the_agent_powers_off_and_holds_no_secret():
    env = instance_env("s3://bucket/jobs/j 1", "ami-1", LaunchOptions())
    text = user_data("s3://bucket/jobs/j 1", 3, env)
    assert f"'./{env.wheel_name}[tf-gpu,s3]'" in text and env.wheel_url in text
    assert 'IMDS="${SPOTFIT_IMDS_URL:-http://169.254.169.254}"' in text
    assert "spotfit.backends.aws.agent 's3://bucket/jobs/j 1' 3 --imds \"$IMDS\"" in text
    # Whatever happens (the EXIT trap), the boot log goes to the store, then the instance powers off.
    power_off = text.split("power_off() {", 1)[1].split("}", 1)[0]
    assert "trap power_off EXIT" in text and power_off.index("boot.log") < power_off.index("shutdown -h now")
    assert "s3://bucket/jobs/j 1/logs/attempt-0003.boot.log" in power_off
    for word in ("AKIA", "aws_secret_access_key", "AWS_SESSION_TOKEN", "password"):
        assert word.lower() not in text.lower()
    with pytest.raises(BackendError, match="credentials"):
        check_no_secrets("export AWS_SECRET_ACCESS_KEY=abc")
    with pytest.raises(BackendError):
        user_data("s3://AKIAABCDEFGHIJKLMNOP:x@bucket/j", 1, env)


def test_user_data_installs_a_published_spotfit_only_when_runtime_pip_says_so():
    env = instance_env("s3://b/jobs/j", "ami-1", LaunchOptions(runtime_pip="spotfit[tf-gpu,s3]==0.1.0"))
    text = user_data("s3://b/jobs/j", 1, env)
    assert env.wheel_url is None and "wheels/" not in text and "'spotfit[tf-gpu,s3]==0.1.0'" in text


def test_a_notebook_job_installs_the_notebook_extra_and_a_training_job_does_not():
    def installed(raw: dict) -> str:
        spec = parse_spec({"name": "j", "backend": "aws", **raw})
        env = instance_env("s3://b/jobs/j", "ami-1", backend_options(spec))
        return user_data("s3://b/jobs/j", 1, env)

    assert f"'./{running_wheel().filename}[tf-gpu,s3,notebook]'" in installed({"kind": "notebook"})
    assert f"'./{running_wheel().filename}[tf-gpu,s3]'" in installed({"script": "train.py"})
    custom = installed({"kind": "notebook", "aws": {"runtime_extras": ["s3", "notebook"]}})
    assert f"'./{running_wheel().filename}[s3,notebook]'" in custom  # named once, not twice


def test_spec_refuses_ssh_open_beyond_one_address():
    raw = {"name": "j", "script": "train.py", "backend": "aws", "aws": {"ssh_cidr": "0.0.0.0/0", "key_name": "k"}}
    with pytest.raises(SpecError, match="aws.ssh_cidr"):
        parse_spec(raw)
    ok = parse_spec({**raw, "aws": {"ssh_cidr": "203.0.113.7/32", "key_name": "k", "region": "eu-west-1"}})
    assert ok.aws.region == "eu-west-1" and ok.aws.worker_port == 2222
