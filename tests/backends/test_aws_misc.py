"""AMI lookup, spot price history as a trace, `run --backend aws --dry-run`, no-capacity masking."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta

import pytest

from spotfit.backends.aws.ami import DEFAULT_NAME, resolve_ami
from spotfit.backends.aws.prices import refresh_market
from spotfit.errors import BackendError
from spotfit.market.offers import plan
from spotfit.market.policies.base import spot
from spotfit.market.trace import load_trace
from tests.support.aws_moto import publish_spot_prices
from tests.support.jobs import spotfit_cmd


def test_ami_by_id_ssm_parameter_and_name(aws):
    ssm = aws.session.client("ssm")
    assert resolve_ami(aws.ec2, ssm, "ami-0abc") == "ami-0abc"
    ssm.put_parameter(Name="/team/dlami", Value="ami-0fromssm", Type="String")
    assert resolve_ami(aws.ec2, ssm, "ssm:/team/dlami") == "ami-0fromssm"
    found = resolve_ami(aws.ec2, ssm, "name:Deep Learning AMI Amazon Linux*")  # one of moto's images
    assert found.startswith("ami-")
    with pytest.raises(BackendError, match="does not exist"):
        resolve_ami(aws.ec2, ssm, "ssm:/missing")
    with pytest.raises(BackendError, match="No machine image named like"):  # moto has neither default
        resolve_ami(aws.ec2, ssm, None)
    assert DEFAULT_NAME.startswith("Deep Learning")


def test_spot_price_history_becomes_a_trace_the_planner_reads(aws, tmp_path):
    # moto's own history is a placeholder ($0.00001/h, CPU types only): publish V100 prices instead.
    now = datetime(2026, 11, 30, 12)
    price = {"us-east-1a": 0.92, "us-east-1b": 1.10}
    publish_spot_prices(aws.session, "p3.2xlarge",
                        {zone: [(now - timedelta(hours=5), p)] for zone, p in price.items()})
    ec2 = aws.session.client("ec2", region_name="us-east-1")
    path = refresh_market(ec2, "p3.2xlarge", tmp_path / "live.csv", hours=4, gap_s=300, now=now)
    trace = load_trace(path)
    assert trace.gap_s == 300 and trace.n_ticks == 48 and trace.zones == ("us-east-1a", "us-east-1b")
    assert trace.available.all() and (trace.on_demand_usd_per_h == 3.06).all()  # catalog on-demand

    # A floor of 10% (the default): under 5% a half-hour job, whose 0.2 h start-up could be lost
    # to a reclaim, is planned on on-demand (docs/job-spec.md, `market.max_overpay`).
    p = plan("V100", count=1, work_h=0.5, deadline_h=1.5, trace=str(path), starts=3, max_overpay=0.1)
    history = {tuple(o.zones): o for o in p.offers if o.basis == "history"}
    assert set(history) == {("us-east-1a",), ("us-east-1b",), ("us-east-1a", "us-east-1b")}
    # Spot never goes away in a price history: spot from the first tick, 0.2 h start-up then
    # 0.5 h of work = 9 ticks of 300 s, each billed at the zone's price.
    for zone, usd_per_h in price.items():
        offer = history[(zone,)]
        assert offer.spot_usd_per_h == usd_per_h and offer.on_demand_usd_per_h == 3.06
        assert offer.expected_cost_usd == pytest.approx(9 * 300 / 3600 * usd_per_h)
        assert offer.expected_preemptions == 0 and offer.deadline_met_share == 1.0
    both = history[("us-east-1a", "us-east-1b")]
    assert both.expected_cost_usd == pytest.approx(history[("us-east-1a",)].expected_cost_usd)  # the cheaper zone
    assert "us-east-1a" in p.recommended.zones and p.recommended.basis == "history"
    assert p.recommended.expected_cost_usd < min(o.expected_cost_usd for o in p.offers if o.basis == "catalog")


SPEC = """
name: dry
script: train.py
backend: local
resources: {accelerator: V100, count: 1, workers: 2}
market: {trace: null, zones: [us-west-2b]}
aws: {ami: ami-0123456789abcdef0, key_name: me, ssh_cidr: 203.0.113.7/32}
data: {source: s3://bucket/data, size_gib: 200}
"""


def test_run_dry_run_prints_the_exact_requests_and_sends_nothing(tmp_path, job_spec):
    spec = job_spec(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "none")  # no credentials
    out = subprocess.run(spotfit_cmd("run", str(spec), "--backend", "aws", "--dry-run", "--json"),
                         capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["sent"] is False and doc["zone"] == "us-west-2b"
    ops = {c["operation"]: c["params"] for c in doc["calls"]}
    assert list(ops) == ["CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "CreatePlacementGroup",
                         "RunInstances"]
    run = ops["RunInstances"]
    assert run["ImageId"] == "ami-0123456789abcdef0" and run["MaxCount"] == 2
    assert run["Placement"] == {"AvailabilityZone": "us-west-2b", "GroupName": ops["CreatePlacementGroup"]["GroupName"]}
    assert "#!/bin/bash" in run["UserData"]
    # The root gp3 volume is sized for the 200 GiB dataset: 100 + 200 × 1.2 + 10 GiB.
    assert run["BlockDeviceMappings"] == [{"DeviceName": "/dev/sda1", "Ebs": {
        "VolumeSize": 350, "VolumeType": "gp3", "Iops": 6000, "Throughput": 500, "DeleteOnTermination": True}}]
    assert doc["disk"] == "root volume /dev/sda1: gp3 350 GiB, 6000 IOPS, 500 MiB/s (sized for `data.size_gib`)"
    text = subprocess.run(spotfit_cmd("run", str(spec), "--backend", "aws", "--dry-run"), capture_output=True,
                          text=True, timeout=60, env=env, stdin=subprocess.DEVNULL).stdout
    assert "disk: root volume /dev/sda1: gp3 350 GiB" in text and '"BlockDeviceMappings"' in text
    assert any("s3://" in w for w in doc["warnings"])
    listed = subprocess.run(spotfit_cmd("list", "--json"), capture_output=True, text=True, env=env)
    assert json.loads(listed.stdout) == []  # nothing recorded
    bad = subprocess.run(spotfit_cmd("run", str(spec), "--backend", "azure"), capture_output=True, text=True,
                         env=env, stdin=subprocess.DEVNULL)
    assert bad.returncode == 2 and "Invalid backend: received 'azure'" in bad.stderr


def test_a_zone_without_capacity_is_down_for_the_policy_until_the_next_tick(tmp_path):
    from spotfit import sdk
    from spotfit.controller.attempts import AttemptPlanner
    from spotfit.spec.job import JobSpec

    spec = JobSpec.model_validate({"name": "ice", "script": "train.py", "market": {
        "trace": "aws-v100", "zones": ["us-west-2a", "us-west-2b"], "start": "2023-02-17T19:16:00",
        "policy": "greedy", "time_scale": 1.0}, "deadline_h": 100, "work_h": 1})
    job_id = "ice-1"
    sdk.db().create_job(job_id, "ice", spec.model_dump_json(), f"file://{tmp_path}/s")
    plan = AttemptPlanner(spec, sdk.db(), job_id)
    plan.start_clock()
    first = plan.decide(None, {})
    assert first == spot("us-west-2a") and first.market == "spot"  # the policy's decision, unchanged
    plan.mark_no_capacity("us-west-2a")
    assert plan.decide(None, {}) != first  # greedy holds one zone: it now waits or goes on-demand
    plan._no_capacity["us-west-2a"] -= 3 * plan.market.replay.gap_s  # the mark was made ticks ago
    assert plan.decide(None, {}) == first
