"""The main AWS end-to-end test: the real boot path on an emulated instance, through a spot interruption.

moto server (EC2, SSM, IAM, STS), SeaweedFS (S3) and an IMDS server per instance, all on
127.0.0.1 (tests/support/emulated_instance.py). Each instance runs its actual user-data in a
sandbox: it installs the spotfit wheel the controller shipped and the job's environment (or
unpacks the cached venv), and the agent runs the runtime on the digits script. The controller,
the backend, the agent, the runtime and TensorFlow are the real ones; what is emulated is listed
in docs/aws.md.
"""

from __future__ import annotations

import os
import uuid

import pytest

from spotfit import sdk
from spotfit.stores import open_store
from tests.support.aws_moto import instances
from tests.support.emulated_instance import EmulatedCloud
from tests.support.preemption_run import TRAINING, ran, through_preemption
from tests.support.sandbox import PROBE, assert_runs_shipped_wheel
from tests.support.seaweed import BUCKET

pytestmark = [pytest.mark.slow, pytest.mark.emulated_instance]

AWS = """
name: emulated
backend: aws
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-west-2a, us-west-2b], preemptions: [{{at_step: 20, notice_s: {notice_s}}}]}}
aws: {{ami: ami-12c6146b, region: us-west-2, runtime_extras: [s3]}}
environment: {{pip: ["{probe}==1.0"]}}
""" + TRAINING
NOTICE_S = 120 * 0.25  # EC2's two-minute notice, scaled down; the runtime saves within a few seconds of it


@pytest.fixture
def cloud(tmp_path, seaweed, monkeypatch):
    seaweed.make_bucket(BUCKET)
    emulated = EmulatedCloud(tmp_path / "cloud", seaweed).start()
    for name, value in emulated.controller_env().items():
        monkeypatch.setenv(name, value)
    yield emulated
    emulated.stop()


def test_spot_interruption_on_emulated_instances_resumes_in_the_next_zone_with_identical_weights(
        tmp_path, cloud, job_spec):
    store = f"s3://{BUCKET}/emulated-{uuid.uuid4().hex[:6]}"
    local_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    job_id, doc, baseline = through_preemption(cloud, str(job_spec(AWS.format(store=store, notice_s=NOTICE_S,
                                                                              probe=PROBE))), tmp_path, local_env)
    booted = list(cloud.instances.values())
    logs = "\n".join(f"--- {i.instance_id} ({i.zone})\n{i.boot_log[-3000:]}" for i in booted)
    assert doc["state"] == "completed", (doc, logs)

    # The job saved at the step of the notice, was marked preempted, and went on in the next zone.
    assert ran(doc) == [("preempted", "us-west-2a", 0, 20), ("completed", "us-west-2b", 20, 47)], doc["attempts"]
    assert doc["weights_sha256"] == baseline["weights_sha256"]

    # Two real boots: each ran its user-data to `shutdown`, polled IMDS with a token and imported
    # the shipped wheel, not this checkout. The first installed the environment, the second
    # unpacked it from the cache.
    assert [i.zone for i in booted] == ["us-west-2a", "us-west-2b"] and all(i.powered_off for i in booted), logs
    assert all(i.imds.requests["GET /latest/meta-data/spot/instance-action"] > 0 for i in booted)
    assert not any("no token" in path for i in booted for path in i.imds.requests)
    first, second = booted
    # Each instance uploaded its boot log as it powered off: `spotfit logs` shows its tail.
    boot_tail = sdk.logs(job_id)["boot_log_tail"]
    assert "unpacked from the cache" in boot_tail and "powering off" in boot_tail, boot_tail
    assert "installed" in first.boot_log and "unpacked from the cache" in second.boot_log, logs
    assert_runs_shipped_wheel(second)
    assert open_store(store).exists(f"jobs/{job_id}/attempts/0001/exit.json")

    # Everything the attempts created is gone.
    states = {i["InstanceId"]: i["State"]["Name"] for i in instances(cloud.ec2, job_id)}
    assert set(states.values()) == {"terminated"}, states
    # (find_leftovers would ask for placement groups, which moto does not implement)
    tagged = [{"Name": "tag:spotfit:job", "Values": [job_id]}]
    assert cloud.ec2.describe_security_groups(Filters=tagged)["SecurityGroups"] == []
    requests = cloud.ec2.describe_spot_instance_requests(Filters=tagged)["SpotInstanceRequests"]
    assert all(r["State"] in ("cancelled", "closed") for r in requests), requests
