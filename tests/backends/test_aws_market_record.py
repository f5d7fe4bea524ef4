"""`spotfit market record` appends live prices and the outages seen here to a trace file that
`plan --trace` and `simulate --trace` read (moto answers EC2; the prices are published through
`publish_spot_prices`, moto's own being placeholders)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from typer.testing import CliRunner

from spotfit import sdk
from spotfit.backends.aws.record import record
from spotfit.cli import app
from spotfit.errors import UsageError
from spotfit.market.trace import load_trace
from spotfit.state.states import AttemptState
from tests.support.aws_moto import publish_spot_prices

SPEC = """
name: rec
script: train.py
backend: aws
resources: {accelerator: V100, count: 1, spot: true}
market: {trace: null, zones: [us-west-2a, us-west-2b]}
aws: {region: us-west-2}
"""


@pytest.fixture
def prices(aws, monkeypatch):
    """p3.2xlarge prices in two zones over the last two hours; the CLI's sessions are moto's."""
    now = datetime.now(UTC)
    publish_spot_prices(aws.session, "p3.2xlarge", {
        "us-west-2a": [(now - timedelta(hours=2), 0.9), (now - timedelta(minutes=30), 1.2)],
        "us-west-2b": [(now - timedelta(hours=2), 0.8)]})
    monkeypatch.setattr(boto3, "Session", lambda *a, **k: aws.session)
    return now


def _preempted_attempt(job_spec, zone: str, at: float) -> None:
    """An aws job of this machine whose attempt was preempted in `zone` at epoch second `at`."""
    job_id = sdk.submit(str(job_spec(SPEC)))
    sdk.db().add_attempt(job_id, backend="aws", zone=zone, market="spot", state=AttemptState.RUNNING)
    sdk.db().update_attempt(job_id, 1, state=AttemptState.PREEMPTED, ended_at=at)


def test_record_writes_a_trace_that_plan_and_simulate_read(prices, job_spec, tmp_path):
    outage_at = (prices - timedelta(minutes=12)).timestamp()
    _preempted_attempt(job_spec, "us-west-2a", outage_at)
    path = tmp_path / "p3.csv"
    out = CliRunner().invoke(app, ["market", "record", "--region", "us-west-2", "--instance-type", "p3.2xlarge",
                                   "--trace", str(path), "--hours", "1", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["zones"] == ["us-west-2a", "us-west-2b"] and doc["rows"] == 24 and doc["outages"] == 1
    trace = load_trace(path)
    assert trace.gap_s == 300 and trace.n_ticks == 12 and trace.zones == ("us-west-2a", "us-west-2b")
    a = trace.zone_index("us-west-2a")
    assert list(trace.spot_usd_per_h[a, :5]) == [0.9] * 5 and trace.spot_usd_per_h[a, -1] == 1.2
    assert int(trace.available[a].sum()) == 11 and trace.available[trace.zone_index("us-west-2b")].all()
    assert trace.on_demand_usd_per_h[a, 0] == 3.06  # the catalog's p3.2xlarge in us-west-2
    plan = sdk.plan(str(job_spec(SPEC + "work_h: 0.2\ndeadline_h: 0.5\n", name="plan")), trace=str(path))
    assert any(o.get("basis") == "history" for o in plan["offers"]), plan["offers"][:3]
    sim = sdk.simulate(str(path), work_h=0.2, deadline_h=0.5, overhead_h=0.01, starts=1, policy="default")
    assert {r["zone"] for r in sim["runs"]} >= {"us-west-2a", "us-west-2b"}  # and "*" for multi-zone runs
    assert all(r["met_deadline"] and r["cost_usd"] > 0 for r in sim["runs"]), sim["runs"]


def test_record_appends_after_the_last_tick(aws, prices, tmp_path):
    path = tmp_path / "p3.csv"
    ec2 = aws.session.client("ec2")
    now = prices.replace(tzinfo=None)
    record(ec2, "p3.2xlarge", path, None, [], hours=1, gap_s=300, now=now - timedelta(minutes=30))
    first = load_trace(path)
    again = record(ec2, "p3.2xlarge", path, None, [], hours=1, gap_s=300, now=now)
    trace = load_trace(path)
    assert again["rows"] == 2 * 6 and trace.n_ticks == first.n_ticks + 6
    assert trace.start == first.start and trace.gap_s == 300
    with pytest.raises(UsageError, match="records us-west-2a, us-west-2b"):
        record(ec2, "p3.2xlarge", path, ["us-west-2a"], [], now=now + timedelta(hours=1))
