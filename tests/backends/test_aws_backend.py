"""The aws backend against moto (in-process): launch, idempotency, capacity, workers, clean-up."""

from __future__ import annotations

import base64
import json

import pytest

from spotfit.backends.aws import launch as rq
from spotfit.backends.aws.backend import AwsBackend
from spotfit.backends.aws.gc import find_leftovers, remove
from spotfit.backends.base import make_backend
from spotfit.errors import NoCapacityError, UsageError
from spotfit.stores import open_store
from tests.support.aws_moto import REGION, aws_backend, fail_run_instances, instances, launch_request
from tests.support.wait import wait_for


def test_registered_and_loaded_lazily():
    assert make_backend("aws").name == "aws"


def test_launch_parameters_as_ec2_records_them(aws, job):
    backend = aws_backend(aws)
    handle = backend.launch(launch_request(job, ssh_cidr="203.0.113.7/32", key_name="me"))
    [inst] = instances(aws.ec2, "job-1")
    assert inst["InstanceId"] == handle.instances[0]
    assert inst["Placement"]["AvailabilityZone"] == "us-west-2b"
    assert inst["InstanceType"] == "p3.2xlarge"  # the catalog's V100 x1 type
    assert inst["InstanceLifecycle"] == "spot"
    assert inst["MetadataOptions"]["HttpTokens"] == "required"
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags["spotfit:job"] == "job-1" and tags["spotfit:attempt"] == "1"
    attr = aws.ec2.describe_instance_attribute(InstanceId=inst["InstanceId"],
                                               Attribute="instanceInitiatedShutdownBehavior")
    assert attr["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
    ud = aws.ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")
    text = base64.b64decode(ud["UserData"]["Value"]).decode()
    assert job in text and "shutdown -h now" in text
    assert "testing" not in text and "MY_FLAG" not in text  # no credentials, no env in user-data
    [sg] = aws.ec2.describe_security_groups(GroupIds=[handle.security_group])["SecurityGroups"]
    assert sg["GroupId"] in {g["GroupId"] for g in inst["SecurityGroups"]}
    [ssh] = sg["IpPermissions"]
    assert ssh["FromPort"] == 22 and [r["CidrIp"] for r in ssh["IpRanges"]] == ["203.0.113.7/32"]
    launch = json.loads(open_store(job).read_bytes("attempts/0001/launch.json"))
    assert launch["env"] == {"MY_FLAG": "1"} and launch["workers"] == 1
    archive = open_store(job).read_bytes(launch["code_key"])
    import io
    import tarfile

    names = tarfile.open(fileobj=io.BytesIO(archive)).getnames()
    assert names == ["train.py"]  # caches stay home
    [run] = aws.calls.of("RunInstances")
    assert run["ClientToken"] == rq.client_token("job-1", 1)


def test_no_ssh_rule_without_a_key_pair(aws, job):
    handle = aws_backend(aws).launch(launch_request(job))
    [sg] = aws.ec2.describe_security_groups(GroupIds=[handle.security_group])["SecurityGroups"]
    assert sg["IpPermissions"] == []


def test_stop_terminates_and_deletes_the_group(aws, job):
    backend = aws_backend(aws)
    handle = backend.launch(launch_request(job))
    assert backend.status(handle).running
    backend.stop(handle, grace_s=0)
    assert not backend.status(handle).running
    assert {i["State"]["Name"] for i in instances(aws.ec2, "job-1")} == {"terminated"}
    assert find_leftovers(aws.ec2, job="job-1").security_groups == {}
    backend.stop(handle, grace_s=0)  # idempotent


def test_preempt_asks_the_instance_then_terminates_after_the_notice(aws, job):
    backend = aws_backend(aws)
    handle = backend.launch(launch_request(job))
    backend.preempt(handle, notice_s=0.2)
    assert json.loads(open_store(job).read_bytes("attempts/0001/preempt.json"))["notice_s"] == 0.2
    assert backend.status(handle).running  # the notice runs: the agent forwards SIGTERM meanwhile
    wait_for(lambda: not backend.status(handle).running, 60, "the instance to be terminated after its 0.2 s notice")


def test_a_retried_launch_with_the_same_client_token_yields_one_instance(aws, job):
    # moto 5.2 does not honour ClientToken (two RunInstances with one token make two instances),
    # so the backend also looks for instances tagged with the token before launching.
    backend = aws_backend(aws)
    first = backend.launch(launch_request(job))
    again = aws_backend(aws).launch(launch_request(job))  # e.g. a controller restarted mid-launch
    assert again.instances == first.instances
    assert again.security_group == first.security_group
    assert len(instances(aws.ec2, "job-1")) == 1
    assert [r["ClientToken"] for r in aws.calls.of("RunInstances")] == [rq.client_token("job-1", 1)]


def test_insufficient_capacity_is_no_capacity_and_leaves_nothing(aws, job):
    fail_run_instances(aws.session, "us-west-2b")
    with pytest.raises(NoCapacityError, match="InsufficientInstanceCapacity"):
        aws_backend(aws).launch(launch_request(job))
    assert len(find_leftovers(aws.ec2, job="job-1")) == 0
    handle = aws_backend(aws).launch(launch_request(job, attempt=2, zone="us-west-2a"))  # the next offer works
    assert handle.instances


def test_two_workers_share_a_zone_a_cluster_group_a_private_port_and_a_cluster_spec(aws, job):
    backend = aws_backend(aws)
    handle = backend.launch(launch_request(job, workers=2))
    workers = sorted(instances(aws.ec2, "job-1"), key=lambda i: i["AmiLaunchIndex"])
    assert tuple(i["InstanceId"] for i in workers) == handle.instances
    assert {i["Placement"]["AvailabilityZone"] for i in workers} == {"us-west-2b"}
    group = aws.placement_groups.groups[handle.placement_group]
    assert group["Strategy"] == "cluster"
    [run] = aws.calls.of("RunInstances")
    assert run["Placement"]["GroupName"] == handle.placement_group  # moto drops it: checked as sent
    [sg] = aws.ec2.describe_security_groups(GroupIds=[handle.security_group])["SecurityGroups"]
    [rule] = sg["IpPermissions"]
    assert (rule["FromPort"], rule["ToPort"]) == (2222, 2222)
    assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [handle.security_group]
    assert rule["IpRanges"] == [] and rule["Ipv6Ranges"] == []
    cluster = json.loads(open_store(job).read_bytes("attempts/0001/cluster.json"))
    assert cluster["worker"] == [f"{i['PrivateIpAddress']}:2222" for i in workers]
    # One worker reclaimed: the attempt is over for both; stop releases everything.
    aws.ec2.terminate_instances(InstanceIds=[workers[1]["InstanceId"]])
    assert not backend.status(handle).running
    backend.stop(handle, grace_s=0)
    assert {i["State"]["Name"] for i in instances(aws.ec2, "job-1")} == {"terminated"}
    assert aws.placement_groups.groups == {}
    assert len(find_leftovers(aws.ec2, job="job-1")) == 0


def test_gc_removes_leftovers_by_tag_but_keeps_active_jobs(aws, job, tmp_path):
    backend = aws_backend(aws)
    backend.launch(launch_request(job, workers=2))  # a controller died: nothing stopped it
    found = find_leftovers(aws.ec2)
    assert len(found.instances) == 2 and len(found.security_groups) == 1 and len(found.placement_groups) == 1
    assert len(find_leftovers(aws.ec2, keep={"job-1"})) == 0
    report = remove(aws.ec2, found, wait_s=5, poll_s=0.01)
    assert report["still_in_use"] == []
    assert len(find_leftovers(aws.ec2)) == 0
    assert {i["State"]["Name"] for i in instances(aws.ec2, "job-1")} == {"terminated"}


def test_gc_verb(aws, job, monkeypatch):
    from types import SimpleNamespace

    from typer.testing import CliRunner

    import spotfit.cli.leftovers  # noqa: F401  (registers the verb)
    from spotfit.cli.app import app

    # The verb's own session, with the placement-group stand-in moto lacks.
    monkeypatch.setattr("spotfit.backends.aws.gc.load_boto3", lambda: SimpleNamespace(Session=lambda: aws.session))
    aws_backend(aws).launch(launch_request(job))
    runner = CliRunner()
    out = runner.invoke(app, ["gc", "--region", REGION, "--dry-run", "--json"])
    assert out.exit_code == 0, (out.output, out.exception)
    listed = json.loads(out.stdout)
    assert listed["regions"][0]["count"] == 2  # the instance and its security group
    assert len(find_leftovers(aws.ec2)) == 2
    done = runner.invoke(app, ["gc", "--region", REGION])
    assert done.exit_code == 0 and "removed 2 resource(s)" in done.stdout
    assert len(find_leftovers(aws.ec2)) == 0


def test_local_stores_are_refused_outside_tests(aws, job):
    with pytest.raises(UsageError, match="expected an s3://"):
        AwsBackend(session=aws.session).launch(launch_request(job))
    assert instances(aws.ec2, "job-1") == []


def test_credentials_in_the_job_env_are_refused(aws, job):
    request = launch_request(job)
    request.env["AWS_SECRET_ACCESS_KEY"] = "x"
    with pytest.raises(UsageError, match="AWS_SECRET_ACCESS_KEY"):
        aws_backend(aws).launch(request)
