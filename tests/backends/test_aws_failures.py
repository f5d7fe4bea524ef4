"""Failures on the aws backend are bounded: a crash loop, a boot that never reaches the runtime,
and launch errors that are not answers of the EC2 API all end the job `failed` after
`max_failures`, with a backoff between launches and nothing left running.

SIMULATED (moto runs no machine): an instance whose install fails powers off without an exit
record, after uploading its boot log where the instance does (`sdk.boot_log_key`); the
instances themselves, every EC2 call and the controller are the real ones.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import boto3

from spotfit import sdk
from spotfit.backends.aws.backend import AwsBackend
from spotfit.backends.aws.gc import find_leftovers
from spotfit.controller.loop import Controller
from spotfit.stores import open_store
from tests.support.aws_moto import REGION, aws_backend, instances, publish_spot_prices
from tests.support.wait import wait_for

SPEC = """
name: awsfail
script: train.py
backend: aws
resources: {accelerator: V100, count: 1, spot: true}
market: {trace: null, zones: [us-west-2a]}
aws: {ami: ami-12c6146b, region: us-west-2%s}
max_failures: 2
failure_backoff_s: 0.05
"""


class PowersOffAtBoot(threading.Thread):
    """Every instance uploads its boot log and powers off before the runtime runs (a failed install)."""

    def __init__(self, ec2, job_id: str, job_url: str):
        super().__init__(daemon=True)
        self.ec2, self.job_id, self.store = ec2, job_id, open_store(job_url)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            for inst in instances(self.ec2, self.job_id):
                if inst["State"]["Name"] in ("pending", "running"):
                    attempt = int({t["Key"]: t["Value"] for t in inst["Tags"]}["spotfit:attempt"])
                    lines = [f"boot line {i}" for i in range(100)] + [
                        "ERROR: No matching distribution found for spotfit[tf-gpu,s3]==0.1.0",
                        "spotfit: attempt over, powering off"]
                    self.store.write_bytes(sdk.boot_log_key(attempt), "\n".join(lines).encode())
                    self.ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])


def _run(backend, job_id: str) -> dict:
    loop = threading.Thread(target=lambda: Controller(sdk.db(), job_id, backend=backend, poll_s=0.02).run(),
                            daemon=True)
    loop.start()
    wait_for(lambda: not loop.is_alive(), 120, f"the controller to drive job {job_id} to its end")
    return {**sdk.status(job_id), "events": sdk.events(job_id)}


def _nothing_left(aws, job_id: str) -> None:
    assert {i["State"]["Name"] for i in instances(aws.ec2, job_id)} <= {"terminated"}
    assert len(find_leftovers(aws.ec2, job=job_id)) == 0


def test_a_crash_looping_job_fails_after_max_failures_with_backoff_and_boot_log(aws, job_spec):
    publish_spot_prices(aws.session, "p3.2xlarge", {"us-west-2a": [(datetime.now(UTC) - timedelta(hours=1), 0.9)]})
    job_id = sdk.submit(str(job_spec(SPEC % "")))
    side = PowersOffAtBoot(aws.ec2, job_id, sdk.status(job_id)["store"])
    side.start()
    try:
        doc = _run(aws_backend(aws), job_id)
    finally:
        side.done.set()
    assert doc["state"] == "failed", doc
    assert "max_failures=2" in doc["message"]
    assert [a["state"] for a in doc["attempts"]] == ["killed"] * 3  # 1 try + 2 retries, then no more
    assert [a["failure"] for a in doc["attempts"]] == ["no_exit_record"] * 3
    backoffs = [e["data"]["delay_s"] for e in doc["events"] if e["kind"] == "backoff"]
    assert backoffs == [0.05, 0.1]  # doubled after each failure in a row; none after the last
    assert not any(e["kind"] == "preemption_notice" for e in doc["events"])
    tail = sdk.logs(job_id)["boot_log_tail"].splitlines()
    assert len(tail) == sdk.BOOT_LOG_LINES and tail[-2].startswith("ERROR: No matching distribution")
    rows = sdk.cost(job_id)["rows"]
    assert [r["failure"] for r in rows] == ["no_exit_record"] * 3
    # Each instance that booted is billed at the live spot price, with EC2's 60-second minimum.
    assert all(r["billed_s"] >= 60.0 and r["cost_usd"] >= 60.0 / 3600 * 0.9 - 1e-9 for r in rows), rows
    assert sdk.cost(job_id)["totals"]["spent_usd"] >= 3 * 60.0 / 3600 * 0.9 - 1e-6
    _nothing_left(aws, job_id)


def test_a_boot_that_never_reaches_the_runtime_times_out_and_counts(aws, job_spec):
    job_id = sdk.submit(str(job_spec((SPEC % ", boot_timeout_s: 0.3").replace("max_failures: 2", "max_failures: 1"))))
    doc = _run(aws_backend(aws), job_id)  # nothing ever runs on the instances: no progress
    assert doc["state"] == "failed", doc
    assert [(a["state"], a["failure"]) for a in doc["attempts"]] == [("failed", "boot_timeout")] * 2
    assert any(e["kind"] == "attempt_failed" and "boot timeout" in e["message"] for e in doc["events"])
    _nothing_left(aws, job_id)


def test_missing_credentials_fail_the_attempt_in_one_line_and_launch_nothing(aws, job_spec, monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask a metadata address for credentials
    backend = AwsBackend(session=boto3.Session(region_name=REGION), allow_local_store=True, cleanup_wait_s=1.0,
                         poll_s=0.01)
    job_id = sdk.submit(str(job_spec((SPEC % "").replace("max_failures: 2", "max_failures: 0"))))
    doc = _run(backend, job_id)
    assert doc["state"] == "failed", doc
    assert [(a["state"], a["failure"], a["cost_usd"]) for a in doc["attempts"]] == [("failed", "launch", 0.0)]
    [event] = [e for e in doc["events"] if e["kind"] == "launch_failed"]
    assert "NoCredentialsError" in event["message"] and "\n" not in event["message"]
    assert "credentials" in event["data"]["hint"]
    _nothing_left(aws, job_id)


def test_an_sdk_error_that_is_not_an_api_answer_is_a_failed_attempt(aws, job_spec, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    backend = AwsBackend(session=session, allow_local_store=True, cleanup_wait_s=1.0, poll_s=0.01)
    backend._clients[("ec2", REGION)] = session.client("ec2", endpoint_url="http://127.0.0.1:9")  # closed port
    job_id = sdk.submit(str(job_spec((SPEC % "").replace("max_failures: 2", "max_failures: 0"))))
    doc = _run(backend, job_id)
    assert doc["state"] == "failed", doc
    [event] = [e for e in doc["events"] if e["kind"] == "launch_failed"]
    assert "EndpointConnectionError" in event["message"], event
    _nothing_left(aws, job_id)
