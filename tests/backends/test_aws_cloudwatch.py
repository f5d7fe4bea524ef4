"""`aws.cloudwatch: true`: the job's step rate, loss, GPU use and spend reach CloudWatch as custom metrics.

moto answers CloudWatch in-process (as it answers EC2); the controller, the backend and every
AWS call are the real ones, and the instance side is the simulated one of
tests/support/simulated_aws.py (moto runs no machine), whose progress reports carry a GPU reading
as the runtime's do on a GPU.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotfit.backends.aws import cloudwatch
from tests.support.aws_moto import publish_spot_prices
from tests.support.simulated_aws import drive, spot_job_text

GPU = {"util_pct": 80.0, "mem_pct": 37.5, "mem_used_gib": 12.0, "mem_total_gib": 32.0, "count": 2}
SPEC = spot_job_text("awscw").replace("aws: {ami: ami-12c6146b, region: us-west-2}",
                                     "aws: {ami: ami-12c6146b, region: us-west-2, cloudwatch: true}")


def _statistic(cw, job_id: str, metric: str, stat: str) -> float:
    now = datetime.now(UTC)
    points = cw.get_metric_statistics(Namespace="spotfit", MetricName=metric, Statistics=[stat], Period=3600,
                                      Dimensions=[{"Name": "JobId", "Value": job_id}, {"Name": "JobName",
                                                                                       "Value": "awscw"}],
                                      StartTime=now - timedelta(hours=2), EndTime=now + timedelta(hours=1))
    return max(p[stat] for p in points["Datapoints"])


def test_a_jobs_metrics_are_published_to_cloudwatch(aws, job_spec, monkeypatch):
    monkeypatch.setattr(cloudwatch, "PUBLISH_EVERY_S", 0.0)  # every controller pass, not every minute
    publish_spot_prices(aws.session, "p3.2xlarge", {"us-west-2a": [(datetime.now(UTC) - timedelta(hours=1), 0.9)]})
    doc = drive(aws, str(job_spec(SPEC)), total_steps=400, timeout_s=120, extra_progress={"gpu": GPU})
    assert doc["state"] == "completed", doc
    assert not [e for e in doc["events"] if e["kind"] == "cloudwatch_failed"]
    cw = aws.session.client("cloudwatch", region_name="us-west-2")
    listed = cw.list_metrics(Namespace="spotfit")["Metrics"]
    assert {m["MetricName"] for m in listed} == {"StepsPerSecond", "Loss", "GPUUtilization", "GPUMemoryUtilization",
                                                 "SpendUSD"}
    assert all({d["Name"]: d["Value"] for d in m["Dimensions"]}["JobId"] == doc["id"] for m in listed)
    assert _statistic(cw, doc["id"], "GPUUtilization", "Average") == 80.0
    assert _statistic(cw, doc["id"], "StepsPerSecond", "Maximum") > 0
    assert 0 < _statistic(cw, doc["id"], "Loss", "Minimum") < 1  # the simulated loss is 1/step
    assert 0 < _statistic(cw, doc["id"], "SpendUSD", "Maximum") <= doc["cost_usd"] + 1e-9  # billed at $0.9/h


def test_a_failing_publication_is_said_once_and_nothing_stops(monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    publisher = cloudwatch.CloudWatchPublisher("j-1", "j", "us-west-2", every_s=0.0)  # no credentials anywhere
    first = publisher.publish({"step": 1, "loss": 0.5}, 0.0)
    assert first is not None and first.startswith("CloudWatch metrics not published (") and "credentials" in first
    assert publisher.publish({"step": 2, "loss": 0.4}, 0.0) is None  # said once
