"""Managed recovery on the replayed market: preemptions, deadline, ledger, controller crash."""

from __future__ import annotations

import csv
import gzip
import json
import os
import signal
import subprocess
import time
from datetime import datetime, timezone

import pytest

from conftest import spotfit_cmd, write_spec
from spotfit.market.trace import resolve_trace

pytestmark = pytest.mark.slow

# us-east-2b from this start: up 54 ticks, down 3, up 58, down 3, up 152, down 7, up 23 ...
FLAKY = """
name: flaky
script: train.py
args: ["--epochs", "{epochs}"]
market: {{trace: aws-v100, zones: [us-east-2b], start: "2023-03-08T17:59:16", time_scale: {scale},
          overhead_h: 1.0}}
checkpoint: {{interval: {{steps: 25}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
"""
# us-east-1a has no spot for 60 ticks (3.25 h) from this start.
DRY = """
name: dry
script: train.py
args: ["--epochs", "6"]
market: {trace: aws-v100, zones: [us-east-1a], start: "2023-02-16T12:19:46", time_scale: 360,
         overhead_h: 0.5}
checkpoint: {interval: {steps: 50}, keep: 2}
training: {seed: 0, deterministic: true}
work_h: 0.8
deadline_h: 2.5
"""
CALM = """
name: calm
script: train.py
args: ["--epochs", "{epochs}"]
market: {{trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 10}}
checkpoint: {{interval: {{steps: 20}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
"""


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


def _json(*args: str) -> dict:
    out = _cli(*args, "--json")
    assert out.returncode in (0, 1), out.stderr[-3000:]
    return json.loads(out.stdout)


def _trace_prices(zone: str) -> tuple[list[float], list[float], float]:
    """(tick start epoch seconds, spot price, on-demand price) read straight from the CSV.

    Time is slotted in ticks of the trace's gap (195 s) from its first timestamp: the model of
    docs/market.md, which the replay bills by.
    """
    starts, prices, od, first = [], [], 0.0, None
    with gzip.open(resolve_trace("aws-v100"), "rt") as f:
        for row in csv.DictReader(f):
            if first is None:
                first = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=timezone.utc).timestamp()
            if row["zone"] == zone:
                starts.append(first + int(row["tick"]) * 195.0)
                prices.append(float(row["spot_price_usd_per_h"]))
                od = float(row["on_demand_usd_per_h"])
    return starts, prices, od


def _recompute(row: dict, zone: str) -> float:
    """Independent recomputation: per-second billing, 60 s minimum, tick prices."""
    starts, prices, od = _trace_prices(zone)
    billed = max(row["end_s"] - row["start_s"], 60.0)
    if row["market"] != "spot":
        return billed / 3600.0 * od
    t, end, cost = row["start_s"], row["start_s"] + billed, 0.0
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else s + 195
        overlap = min(end, e) - max(t, s)
        if overlap > 0:
            cost += overlap / 3600.0 * prices[i]
    return cost


def _check_ledger(job_id: str, zone: str) -> dict:
    ledger = _json("cost", job_id)
    rows = ledger["rows"]
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(ledger["totals"]["spent_usd"], abs=1e-5)
    for r in rows:
        assert r["billed_s"] >= 60.0
        assert r["cost_usd"] == pytest.approx(_recompute(r, zone), rel=1e-4, abs=1e-6)
    numbers = [r["attempt"] for r in rows]
    assert numbers == sorted(set(numbers))  # no attempt billed twice
    return ledger


def test_replayed_preemptions_recover_to_the_same_weights_and_ledger_adds_up(tmp_path):
    base = _json("run", str(write_spec(tmp_path / "calm", CALM.format(epochs=80))))
    assert base["state"] == "completed"
    doc = _json("run", str(write_spec(tmp_path / "flaky", FLAKY.format(epochs=80, scale=2600))))
    assert doc["state"] == "completed", doc
    preempted = [a for a in doc["attempts"] if a["state"] in ("preempted", "killed")]
    assert len(preempted) >= 3, [a["state"] for a in doc["attempts"]]
    assert doc["weights_sha256"] == base["weights_sha256"]
    ledger = _check_ledger(doc["id"], "us-east-2b")
    assert ledger["totals"]["on_demand_usd"] > ledger["totals"]["spent_usd"]
    assert ledger["totals"]["restart_overhead_s"] > 0


def test_tight_deadline_on_a_dry_zone_switches_to_on_demand_and_finishes_in_time(tmp_path):
    doc = _json("run", str(write_spec(tmp_path / "dry", DRY)))
    assert doc["state"] == "completed", doc
    markets = [a["market"] for a in doc["attempts"]]
    assert "on_demand" in markets
    origin = doc["attempts"][0]["trace_start_s"]
    events = _json("logs", doc["id"])["events"]
    launch = next(e for e in events if e["kind"] == "launch")
    assert launch["data"]["trace_s"] - origin >= 0
    finish_h = (doc["attempts"][-1]["trace_end_s"] - _origin(doc)) / 3600.0
    assert finish_h <= 2.5, f"finished at {finish_h:.2f} h, deadline 2.5 h"
    _check_ledger(doc["id"], "us-east-1a")


def _origin(doc: dict) -> float:
    return datetime(2023, 2, 16, 12, 19, 46, tzinfo=timezone.utc).timestamp()


def test_controller_killed_mid_job_resumes_without_duplicate_attempts(tmp_path):
    out = _cli("run", str(write_spec(tmp_path / "calm", CALM.format(epochs=40))), "--detach", "--json")
    job_id = json.loads(out.stdout)["id"]
    deadline = time.monotonic() + 120
    doc = _json("status", job_id)
    while doc["step"] < 100 and time.monotonic() < deadline:
        time.sleep(0.3)
        doc = _json("status", job_id)
    assert doc["step"] >= 100 and doc["controller"] == "alive"
    from spotfit.sdk import db

    pid = db().find_job(job_id)["controller_pid"]
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    assert _json("status", job_id)["controller"] == "gone"
    final = _json("resume", job_id)
    assert final["state"] == "completed", final
    assert len(final["attempts"]) == 1  # the running attempt was adopted, not relaunched
    assert final["attempts"][0]["state"] == "completed"
    events = _json("logs", job_id)["events"]
    assert any(e["kind"] == "adopted" for e in events)
    _check_ledger(job_id, "us-west-2a")
