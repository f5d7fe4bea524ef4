"""`spotfit simulate`, `catalog` and `plan` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert doc["default_policy"] == "spotfit"
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
    assert "Malformed trace bad.csv: row 2 has available='maybe'; expected a number." in proc.stderr
    assert "Traceback" not in proc.stderr


def test_simulate_rejects_a_trace_in_an_unknown_format_with_one_line(tmp_path):
    bad = tmp_path / "prices.csv"
    bad.write_text("time,region,price\n2023-01-01,us-east-1,0.9\n")
    proc = subprocess.run([sys.executable, "-m", "spotfit", "simulate", "--trace", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("Unknown trace format in prices.csv") == 1


def test_catalog_json_filters():
    result = runner.invoke(app, ["catalog", "--accelerator", "V100", "--count", "1", "--cloud", "aws",
                                 "--spot", "--json"])
    assert result.exit_code == 0
    offers = json.loads(result.stdout)["offers"]
    assert offers and all(o["cloud"] == "aws" and o["spot_usd_per_h"] for o in offers)
