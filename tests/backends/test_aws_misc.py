"""AMI lookup, spot price history as a trace, `run --backend aws --dry-run`, no-capacity masking."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime

import pytest

from aws_moto import aws  # noqa: F401  (fixture)
from conftest import spotfit_cmd, write_spec
from spotfit.backends.aws.ami import DEFAULT_NAME, resolve_ami
from spotfit.backends.aws.prices import refresh_market
from spotfit.errors import BackendError
from spotfit.market.trace import load_trace


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
    # moto's price history is placeholder data (one price per zone); the format is what matters.
    ec2 = aws.session.client("ec2", region_name="us-east-1")
    path = refresh_market(ec2, "m5.large", tmp_path / "live.csv", hours=1, gap_s=300,
                          now=datetime(2026, 11, 30, 12), on_demand_usd_per_h=0.096)
    trace = load_trace(path)
    assert trace.gap_s == 300 and trace.n_ticks == 12
    assert all(z.startswith("us-east-1") for z in trace.zones)
    assert trace.available.all() and (trace.on_demand_usd_per_h == 0.096).all()


SPEC = """
name: dry
script: train.py
backend: local
resources: {accelerator: V100, count: 1, workers: 2}
market: {trace: null, zones: [us-west-2b]}
aws: {ami: ami-0123456789abcdef0, key_name: me, ssh_cidr: 203.0.113.7/32}
"""


def test_run_dry_run_prints_the_exact_requests_and_sends_nothing(tmp_path):
    spec = write_spec(tmp_path / "job", SPEC)
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
    assert any("s3://" in w for w in doc["warnings"])
    listed = subprocess.run(spotfit_cmd("list", "--json"), capture_output=True, text=True, env=env)
    assert json.loads(listed.stdout) == []  # nothing recorded
    bad = subprocess.run(spotfit_cmd("run", str(spec), "--backend", "gcp"), capture_output=True, text=True,
                         env=env, stdin=subprocess.DEVNULL)
    assert bad.returncode == 2 and "Invalid backend: received 'gcp'" in bad.stderr


def test_a_zone_without_capacity_is_down_for_the_policy_until_the_next_tick(tmp_path):
    from spotfit import sdk
    from spotfit.controller.attempts import AttemptPlanner
    from spotfit.spec import JobSpec

    spec = JobSpec.model_validate({"name": "ice", "script": "train.py", "market": {
        "trace": "aws-v100", "zones": ["us-west-2a", "us-west-2b"], "start": "2023-02-17T19:16:00",
        "policy": "greedy", "time_scale": 1.0}, "deadline_h": 100, "work_h": 1})
    job_id = "ice-1"
    sdk.db().create_job(job_id, "ice", spec.model_dump_json(), f"file://{tmp_path}/s")
    plan = AttemptPlanner(spec, sdk.db(), job_id)
    plan.start_clock()
    first = plan.decide(None, {})
    assert first == ("spot", "us-west-2a")
    plan.mark_no_capacity("us-west-2a")
    assert plan.decide(None, {}) != first  # greedy holds one zone: it now waits or goes on-demand
    plan._no_capacity["us-west-2a"] -= 3 * plan.replay.gap_s  # the mark was made ticks ago
    assert plan.decide(None, {}) == first
