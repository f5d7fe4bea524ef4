"""The controller loop driving the aws backend under moto, through capacity errors and a spot
interruption, to completion — with every instance terminated and every group deleted.

The fast companion of the main end-to-end test (test_aws_emulated.py, where the real user-data,
agent, runtime and TensorFlow run on emulated instances): no TensorFlow here, so it runs in
`make check`, and it covers what the emulated cloud cannot, the controller's own `preempt.json`
path and placement groups.

The instance side is simulated (`tests/support/simulated_aws.py` says how); the controller, the
backend and every EC2 call are the real ones.
"""

from __future__ import annotations

from spotfit.backends.aws.gc import find_leftovers
from tests.support.aws_moto import fail_run_instances, instances
from tests.support.simulated_aws import drive, spot_job_text

SPEC = spot_job_text("awsjob")


def _drive(aws, job_spec, interrupt_at: dict[int, int], total_steps: int = 40, spec: str | None = None) -> dict:
    return drive(aws, spec or str(job_spec(SPEC)), total_steps, interrupt_at)


def _all_released(aws, job_id: str) -> None:
    states = {i["InstanceId"]: i["State"]["Name"] for i in instances(aws.ec2, job_id)}
    assert states and set(states.values()) == {"terminated"}, states
    assert len(find_leftovers(aws.ec2, job=job_id)) == 0  # no security group or request left
    assert aws.placement_groups.groups == {}


def test_recovery_loop_survives_an_interruption_and_releases_everything(aws, job_spec):
    doc = _drive(aws, job_spec, interrupt_at={1: 20})
    assert doc["state"] == "completed", doc
    assert [(a["state"], a["zone"], a["start_step"], a["end_step"]) for a in doc["attempts"]] == [
        ("preempted", "us-west-2a", 0, 20), ("completed", "us-west-2a", 20, 40)]
    assert any(e["kind"] == "restored" and e["attempt"] == 2 for e in doc["events"])
    _all_released(aws, doc["id"])
    # Each attempt ran on its own instance, tagged, with the attempt's client token.
    assert sorted({t["Value"] for i in instances(aws.ec2, doc["id"]) for t in i["Tags"]
                   if t["Key"] == "spotfit:attempt"}) == ["1", "2"]


def test_insufficient_capacity_relaunches_in_the_next_zone(aws, job_spec):
    fail_run_instances(aws.session, "us-west-2a")
    doc = _drive(aws, job_spec, interrupt_at={2: 10})
    assert doc["state"] == "completed", doc
    assert [(a["state"], a["zone"]) for a in doc["attempts"]] == [
        ("no_capacity", "us-west-2a"), ("preempted", "us-west-2b"), ("completed", "us-west-2b")]
    assert doc["attempts"][0]["cost_usd"] == 0.0
    assert any(e["kind"] == "no_capacity" and "InsufficientInstanceCapacity" in e["message"]
               for e in doc["events"])
    _all_released(aws, doc["id"])
