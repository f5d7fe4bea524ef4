"""`spotfit simulate`, `catalog` and `plan` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import spotfit.cli.market  # noqa: F401  (registers the verbs)
from spotfit.cli.app import app
from tests.support.traces import make_trace, write_csv

runner = CliRunner()


def small_trace(tmp_path):
    up = [[1, 1, 1, 0, 0, 1, 1, 1, 1, 1] * 12, [1, 0] * 60]
    return write_csv(tmp_path / "small.csv", make_trace(up, spot=1.0, gap_s=60, zones=["a1", "a2"]))


def test_simulate_json_shape(tmp_path):
    result = runner.invoke(app, ["simulate", "--trace", str(small_trace(tmp_path)), "--work-h", "0.5",
                                 "--deadline-h", "0.75", "--overhead-h", "0.05", "--starts", "2",
                                 "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["default_policy"] == "mdp"
    run = doc["runs"][0]
    assert {"zone", "start_tick", "policy", "cost_usd", "met_deadline", "finish_h", "launches"} <= set(run)
    assert {r["zone"] for r in doc["runs"]} == {"a1", "a2", "*"}
    rows = {(s["policy"], s["scope"]): s for s in doc["summary"]}
    assert rows[("optimum", "zone")]["mean_ratio_to_optimum"] == 1.0
    assert rows[("spotfit", "multi")]["runs"] == 2
    assert all(r["met_deadline"] for r in doc["runs"])


def test_simulate_table_and_single_policy(tmp_path):
    result = runner.invoke(app, ["simulate", "--trace", str(small_trace(tmp_path)), "--work-h", "0.5",
                                 "--deadline-h", "0.75", "--starts", "1", "--policy", "greedy"])
    assert result.exit_code == 0 and "greedy" in result.stdout


def test_simulate_rejects_a_malformed_trace_with_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("tick,timestamp,zone,available,spot_price_usd_per_h,on_demand_usd_per_h\n"
                   "0,2023-01-01 00:00:00,a,maybe,1.0,3.0\n")
    proc = subprocess.run([sys.executable, "-m", "spotfit", "simulate", "--trace", str(bad), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Malformed trace bad.csv: row 2 has a bad available; expected a number." in proc.stderr
    assert "Traceback" not in proc.stderr


def test_simulate_rejects_a_trace_in_an_unknown_format_with_one_line(tmp_path):
    bad = tmp_path / "prices.csv"
    bad.write_text("time,region,price\n2023-01-01,us-east-1,0.9\n")
    proc = subprocess.run([sys.executable, "-m", "spotfit", "simulate", "--trace", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count(f"Unknown trace format in {bad}: its first line is not a trace header") == 1
    assert "region" not in proc.stderr  # the file's header is not quoted


def test_catalog_json_filters():
    result = runner.invoke(app, ["catalog", "--accelerator", "V100", "--count", "1", "--cloud", "aws",
                                 "--spot", "--json"])
    assert result.exit_code == 0
    offers = json.loads(result.stdout)["offers"]
    assert offers and all(o["cloud"] == "aws" and o["spot_usd_per_h"] for o in offers)


PLAN_SPEC = """
name: planned
script: train.py
resources: {{accelerator: {accelerator}, count: {count}}}
market: {market}
work_h: 1
deadline_h: 1.5
"""


def plan_spec(tmp_path, accelerator="V100", count=1, market="{trace: aws-v100, zones: [us-west-2b]}"):
    path = tmp_path / "job.yaml"
    path.write_text(PLAN_SPEC.format(accelerator=accelerator, count=count, market=market))
    return path


def plan_cli(*args):
    """`spotfit plan ARGS` in process (the same root group, and so the same error handling, as the script)."""
    return runner.invoke(app, ["plan", *map(str, args)])


def test_plan_trace_flag_replays_that_file(tmp_path):
    # A 3-hour price history of two us-east-1 zones of p3.2xlarge (on-demand $3.06/h, as the catalog).
    live = write_csv(tmp_path / "live.csv", make_trace([[1] * 36, [1] * 36], spot=0.9, on_demand=3.06,
                                                       gap_s=300, zones=["us-east-1a", "us-east-1b"]))
    result = runner.invoke(app, ["plan", str(plan_spec(tmp_path, market="{zones: []}")), "--trace", str(live),
                                 "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["trace"] == str(live) and doc["availability_prior"] == 0.17
    history = [o for o in doc["offers"] if o["basis"] == "history"]
    assert {tuple(o["zones"]) for o in history} == {("us-east-1a",), ("us-east-1b",), ("us-east-1a", "us-east-1b")}
    assert all(o["instance_type"] == "p3.2xlarge" and o["availability_prior"] is None for o in history)
    # Spot never falls: every replay costs the same, below on-demand.
    for o in history:
        assert o["cost_p10_usd"] == o["cost_p90_usd"] == o["worst_cost_usd"] == pytest.approx(o["expected_cost_usd"])
        assert o["above_on_demand_share"] == 0.0
    assert doc["recommended"]["basis"] == "history" and doc["recommended"]["launchable"]


def test_plan_shows_simulated_and_catalog_offers_apart(tmp_path):
    result = runner.invoke(app, ["plan", str(plan_spec(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "simulated on aws_p3.2xlarge_v100" in result.stdout
    assert all(col in result.stdout for col in ("p10-p90 $", "worst $", "on-demand"))
    assert "no history, catalog prices, spot available 17% of the time (prior)" in result.stdout
    assert "recommended: #1 aws us-west-2 p3.2xlarge" in result.stdout


def test_plan_of_a100_x8_uses_no_v100_history(tmp_path):
    result = runner.invoke(app, ["plan", str(plan_spec(tmp_path, "A100", 8)), "--json"])
    doc = json.loads(result.stdout)
    assert doc["trace"] is None and {o["basis"] for o in doc["offers"]} == {"catalog"}
    assert doc["recommended"]["instance_type"] == "p4d.24xlarge"


def test_plan_bad_inputs_are_one_line_and_exit_2(tmp_path):
    unknown_format = tmp_path / "weird.csv"
    unknown_format.write_text("when,where,up\n1,a,1\n")
    cases = {
        "expected a time inside the trace": plan_cli(plan_spec(
            tmp_path, market='{trace: aws-v100, start: "2024-06-01T00:00:00"}')),
        "Invalid `market.policy`: received 'cheapest'": plan_cli(plan_spec(
            tmp_path, market="{trace: aws-v100, policy: cheapest}")),
        "records no A100×8 offer": plan_cli(plan_spec(tmp_path, "A100", 8), "--trace", "aws-v100"),
        "weird.csv": plan_cli(plan_spec(tmp_path), "--trace", unknown_format),
    }
    for expected, result in cases.items():
        assert result.exit_code == 2 and result.stdout == "", (expected, result.stderr)
        error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and expected in error[0], (expected, result.stderr)
        assert "Traceback" not in result.stderr
