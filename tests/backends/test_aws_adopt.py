"""A controller that dies inside the launch window on AWS (moto): its successor finds the attempt by tag.

The first controller runs the real loop and backend in a thread and dies at a crash point
(`spotfit.core.crashpoints`): an exception no handler in the loop catches ends the thread
right there, which leaves the state DB and EC2 exactly as a process killed there leaves them
(every DB write is committed when it returns; nothing is cleaned up). moto runs in this
process, so a controller process of its own could not share it; tests/controller/test_adopt.py
kills a real controller process with SIGKILL at the same points on the local backend.

SIMULATED: the instance side. moto starts no machine: the test writes what the runtime and the
agent would write (`result.json`, `attempts/<n>/exit.json`) and terminates the instance, as an
instance that powers off does.
"""

from __future__ import annotations

import json
import threading

import pytest

from spotfit import sdk
from spotfit.attempt.config import RuntimeConfig
from spotfit.backends.aws import launch as rq
from spotfit.backends.aws.gc import find_leftovers
from spotfit.backends.aws.handle import AwsHandle
from spotfit.backends.aws.spec import Aws
from spotfit.backends.base import LaunchRequest
from spotfit.controller.loop import Controller
from spotfit.core import crashpoints
from spotfit.stores import open_store
from tests.support.aws_moto import aws_backend, instances
from tests.support.launch_options import launch_options
from tests.support.wait import wait_for

SPEC = """
name: awsadopt
script: train.py
backend: aws
resources: {accelerator: V100, count: 1, spot: true}
market: {trace: null, zones: [us-west-2a]}
aws: {ami: ami-12c6146b, region: us-west-2}
"""
DEADLINE_S = 60.0


class Died(BaseException):
    """The controller's death at a crash point (no `except` in the loop catches a BaseException)."""


@pytest.fixture
def job(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "train.py").write_text("print('trained')\n")
    (folder / "spotfit.yaml").write_text(SPEC)
    return sdk.submit(str(folder / "spotfit.yaml"))


def _die_at(point: str, monkeypatch) -> None:
    """The next controller to reach `point` dies there; later ones pass."""
    armed = [True]

    def hold(reached: str) -> None:
        if reached == point and armed[0]:
            armed[0] = False
            raise Died(point)

    monkeypatch.setattr(crashpoints, "hold", hold)


def _run_controller(aws, job_id: str) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():  # SQLite connections stay in the thread that made them
        try:
            outcome["state"] = Controller(sdk.db(), job_id, backend=aws_backend(aws), poll_s=0.02).run()
        except Died as exc:
            outcome["died_at"] = str(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _die_in_launch_window(aws, job_id: str, point: str, monkeypatch) -> None:
    _die_at(point, monkeypatch)
    thread, outcome = _run_controller(aws, job_id)
    thread.join(timeout=DEADLINE_S)
    assert outcome.get("died_at") == point, outcome
    [row] = sdk.db().attempts(job_id)
    assert row["state"] == "launching" and row["handle"] is None


def _wait_for(what: str, predicate, timeout_s: float = DEADLINE_S):
    return wait_for(predicate, timeout_s, what)


def _instance_ends(aws, job_id: str, attempt: int) -> None:
    """What the runtime and the agent do at the end of a successful attempt (simulated)."""
    [inst] = [i for i in instances(aws.ec2, job_id)
              if {t["Key"]: t["Value"] for t in i["Tags"]}["spotfit:attempt"] == str(attempt)]
    store = open_store(sdk.status(job_id)["store"])
    store.write_bytes("result.json", json.dumps({"step": 10, "weights_sha256": "0" * 64, "metrics": {}}).encode())
    store.write_bytes(f"attempts/{attempt:04d}/exit.json", json.dumps({"code": 0}).encode())
    aws.ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])


def _all_released(aws, job_id: str) -> None:
    assert {i["State"]["Name"] for i in instances(aws.ec2, job_id)} == {"terminated"}
    assert len(find_leftovers(aws.ec2, job=job_id)) == 0  # no security group or spot request left


def test_a_running_instance_whose_handle_was_never_stored_is_adopted(aws, job, monkeypatch):
    _die_in_launch_window(aws, job, "launched", monkeypatch)
    [inst] = instances(aws.ec2, job)
    assert inst["State"]["Name"] == "running"
    thread, outcome = _run_controller(aws, job)
    _wait_for("the new controller to adopt attempt 1",
              lambda: any(e["kind"] in ("adopted", "attempt_killed") for e in sdk.events(job)))
    handle = AwsHandle.from_json(sdk.db().attempts(job)[0]["handle"])
    assert handle.instances == (inst["InstanceId"],) and handle.security_group
    _instance_ends(aws, job, 1)
    thread.join(timeout=DEADLINE_S)
    assert outcome.get("state") == "completed", sdk.status(job)
    assert [a["state"] for a in sdk.status(job)["attempts"]] == ["completed"]  # no second instance
    assert len(instances(aws.ec2, job)) == 1
    assert any("found by the aws backend" in e["message"] for e in sdk.events(job) if e["kind"] == "adopted")
    _all_released(aws, job)


def test_an_instance_that_ended_meanwhile_is_closed_from_its_exit_record_and_released(aws, job, monkeypatch):
    _die_in_launch_window(aws, job, "launched", monkeypatch)
    _instance_ends(aws, job, 1)
    thread, outcome = _run_controller(aws, job)
    thread.join(timeout=DEADLINE_S)
    assert outcome.get("state") == "completed", sdk.status(job)
    assert [(a["state"], a["exit_code"]) for a in sdk.status(job)["attempts"]] == [("completed", 0)]
    _all_released(aws, job)  # the security group the dead controller made is deleted too


def test_an_attempt_that_died_before_its_launch_is_killed_and_relaunched(aws, job, monkeypatch):
    _die_in_launch_window(aws, job, "launching", monkeypatch)
    assert instances(aws.ec2, job) == []
    thread, outcome = _run_controller(aws, job)
    _wait_for("attempt 2's instance", lambda: any(i["State"]["Name"] == "running" for i in instances(aws.ec2, job)))
    _instance_ends(aws, job, 2)
    thread.join(timeout=DEADLINE_S)
    assert outcome.get("state") == "completed", sdk.status(job)
    assert [a["state"] for a in sdk.status(job)["attempts"]] == ["killed", "completed"]
    assert any("nothing it started was found" in e["message"] for e in sdk.events(job) if e["kind"] == "attempt_killed")
    _all_released(aws, job)


# -- the backend's `find` alone -------------------------------------------------------------------

@pytest.fixture
def job_url(tmp_path):
    url = f"file://{tmp_path}/store/jobs/job-1"
    config = RuntimeConfig(job_id="job-1", job_url=url, script=str(tmp_path / "train.py"), workdir=str(tmp_path),
                           attempt=1)
    (tmp_path / "train.py").write_text("print('hi')\n")
    open_store(url).write_bytes("attempts/0001/runtime.json", config.to_json().encode())
    return url


def _request(url: str, workers: int = 1) -> LaunchRequest:
    return LaunchRequest(job_id="job-1", attempt=1, job_url=url, zone="us-west-2b", market="spot", workers=workers,
                         options=launch_options(Aws, ami="ami-12c6146b"))


def test_find_returns_what_launch_returned_and_nothing_for_another_attempt(aws, job_url):
    backend = aws_backend(aws)
    assert backend.find(_request(job_url)) is None
    launched = backend.launch(_request(job_url, workers=2))
    store = open_store(job_url)
    cluster = store.read_bytes("attempts/0001/cluster.json")
    store.delete("attempts/0001/cluster.json")  # the launch died before it told the workers their peers
    assert aws_backend(aws).find(_request(job_url, workers=2)) == launched
    assert store.read_bytes("attempts/0001/cluster.json") == cluster  # the agents wait for it: written now
    other = LaunchRequest(job_id="job-1", attempt=2, job_url=job_url, zone="us-west-2b", market="spot",
                          options=launch_options(Aws, ami="ami-12c6146b"))
    assert backend.find(other) is None
    backend.stop(launched, grace_s=0)


def test_find_returns_a_security_group_left_by_a_launch_that_died_before_run_instances(aws, job_url):
    def die(**_):
        raise Died("RunInstances")

    aws.session.events.register("provide-client-params.ec2.RunInstances", die)
    backend = aws_backend(aws)
    with pytest.raises(Died):
        backend.launch(_request(job_url))
    aws.session.events.unregister("provide-client-params.ec2.RunInstances", die)
    handle = aws_backend(aws).find(_request(job_url))
    assert handle is not None and handle.instances == () and handle.security_group
    assert handle.security_group == aws.ec2.describe_security_groups(Filters=[
        {"Name": "group-name", "Values": [rq.resource_name("job-1", 1)]}])["SecurityGroups"][0]["GroupId"]
    assert not backend.status(handle).running
    backend.stop(handle, grace_s=0)
    assert len(find_leftovers(aws.ec2, job="job-1")) == 0
