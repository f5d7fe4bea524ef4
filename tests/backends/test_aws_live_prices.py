"""Live prices on the aws backend without a trace: the policy chooses on each zone's published
spot price and on the capacity errors it has seen, the ledger bills those prices, and a budget
rule stops the job where money is really spent.

moto's own spot price history is placeholder data (none for p3.2xlarge), so the tests publish
the prices `DescribeSpotPriceHistory` answers with (`publish_spot_prices`); the instance side is
the simulated one of tests/support/simulated_aws.py (moto runs no machine).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotfit import sdk
from tests.support.aws_moto import fail_run_instances, instances, publish_spot_prices
from tests.support.simulated_aws import drive, spot_job_text

SPEC = spot_job_text("awslive")
CHEAP, DEAR = 0.9, 1.4  # $/h, both under p3.2xlarge's on-demand $3.06


def _publish(aws) -> None:
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    publish_spot_prices(aws.session, "p3.2xlarge", {"us-west-2a": [(hour_ago, DEAR)],
                                                   "us-west-2b": [(hour_ago, CHEAP)]})


def test_the_policy_picks_the_cheapest_zone_and_the_ledger_bills_its_price(aws, job_spec):
    _publish(aws)
    fail_run_instances(aws.session, "us-west-2b")  # the cheap zone has no capacity now
    doc = drive(aws, str(job_spec(SPEC)), total_steps=20, timeout_s=120)
    assert doc["state"] == "completed", doc
    assert any(e["kind"] == "market" and "live prices for us-west-2a, us-west-2b" in e["message"]
               for e in doc["events"])
    # The policy chose the cheaper zone (the spec lists it second); its capacity error went into
    # the market view, and the next decision took the other zone.
    assert [(a["state"], a["zone"]) for a in doc["attempts"]] == [("no_capacity", "us-west-2b"),
                                                                  ("completed", "us-west-2a")]
    done = doc["attempts"][1]
    assert done["billed_s"] >= 60.0
    assert abs(done["cost_usd"] - done["billed_s"] / 3600.0 * DEAR) < 1e-6
    totals = sdk.cost(doc["id"])["totals"]
    assert totals["spent_usd"] == round(done["cost_usd"], 6) and totals["spent_usd"] > 0


def test_an_observed_preemption_moves_the_next_launch_to_another_zone(aws, job_spec):
    _publish(aws)
    doc = drive(aws, str(job_spec(SPEC)), total_steps=20, interrupt_at={1: 10}, timeout_s=120)  # a spot interruption
    assert doc["state"] == "completed", doc
    # The cheap zone was preempted less than a tick ago: the policy sees it down and takes the other.
    assert [(a["state"], a["zone"]) for a in doc["attempts"]] == [("preempted", "us-west-2b"),
                                                                  ("completed", "us-west-2a")]


def test_a_budget_rule_stops_an_aws_job_on_live_prices(aws, job_spec):
    _publish(aws)
    # One billing minute at $0.9/h is $0.015: the budget is spent by the first launch.
    doc = drive(aws, str(job_spec(SPEC + "budget_usd: 0.001\n")), total_steps=10**6, timeout_s=120)
    assert doc["state"] == "stopped", doc
    [rule] = [e for e in doc["events"] if e["kind"] == "rule"]
    assert rule["data"]["rule"] == "budget" and rule["data"]["action"] == "stop"
    [attempt] = doc["attempts"]
    assert attempt["zone"] == "us-west-2b" and attempt["cost_usd"] >= 60.0 / 3600.0 * CHEAP - 1e-9
    assert {i["State"]["Name"] for i in instances(aws.ec2, doc["id"])} == {"terminated"}
