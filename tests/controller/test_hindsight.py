"""`spotfit cost`: the optimum and every policy in the job's own window, and the regret."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from spotfit import sdk
from spotfit.cli import app
from spotfit.market.policies.base import DEFAULT_POLICY, POLICIES
from spotfit.spec.job import JobSpec
from spotfit.state.states import JobState
from tests.support.ledger import GAP_S, launch_cost_usd, ticks

# us-west-2b has spot from tick 188 (2023-02-16 08:19:16) for 80 ticks in a row. A job of 2 h of
# work and 0.2 h of start-up whose deadline leaves less than one tick to spare cannot wait: the
# optimum is one spot launch from the first tick, every tick it overlaps billed in full.
ZONE, FIRST_TICK = "us-west-2b", 188
ORIGIN_S = datetime(2023, 2, 16, 8, 19, 16, tzinfo=UTC).timestamp()
WORK_S, OVERHEAD_S = 7200.0, 720.0
DEADLINE_H = (OVERHEAD_S + WORK_S + 100.0) / 3600.0


def _job(market: dict, backend: str = "local", steps: int = 100) -> str:
    spec = JobSpec.model_validate({"name": "regret", "script": "train.py", "backend": backend,
                                   "deadline_h": DEADLINE_H, "market": market})
    db = sdk.db()
    job_id = f"regret-{backend}-{market.get('trace')}"
    db.create_job(job_id, "regret", spec.model_dump_json(), "memory://regret")
    db.move_job(job_id, JobState.COMPLETED, "set by the test")
    db.update_job(job_id, step=steps, total_steps=steps, trace_origin_s=ORIGIN_S)
    # One spot launch: 720 trace s of start-up (1.2 wall s × time_scale 600), then 72 s a step.
    end_s = ORIGIN_S + OVERHEAD_S + WORK_S
    cost = launch_cost_usd("spot", ZONE, ORIGIN_S, end_s)
    db.add_attempt(job_id, backend=backend, zone=ZONE, market="spot", state="completed", trace_start_s=ORIGIN_S,
                   trace_end_s=end_s, start_step=0, end_step=steps, billed_s=end_s - ORIGIN_S, cost_usd=cost,
                   info={"timings": {"first_step_s": 1.2}, "time_scale": 600.0, "on_demand_usd_per_h": 3.06})
    return job_id


MARKET = {"trace": "aws-v100", "zones": [ZONE], "start": "2023-02-16T08:19:16", "overhead_h": 0.2}


def test_regret_is_spent_over_the_optimum_of_the_jobs_own_window():
    doc = sdk.cost(_job(MARKET))
    t = doc["totals"]
    n = math.ceil((OVERHEAD_S + WORK_S) / GAP_S)
    window = ticks(ZONE)[FIRST_TICK:FIRST_TICK + n]
    assert all(tick.available for tick in window)
    by_hand = sum(tick.spot_usd_per_h for tick in window) * GAP_S / 3600.0
    assert t["optimum_usd"] == pytest.approx(by_hand, rel=1e-6)
    assert set(t["policies"]) == set(POLICIES) - {"optimum"}
    assert t["policies"]["on_demand"] == pytest.approx(n * GAP_S / 3600.0 * 3.06, rel=1e-6)
    assert all(usd >= t["optimum_usd"] - 1e-9 for usd in t["policies"].values())
    assert t["regret"] == round(t["spent_usd"] / t["optimum_usd"], 3)
    w = doc["hindsight"]["window"]
    assert w["zones"] == [ZONE] and w["start"].startswith("2023-02-16T08:19:16")
    assert w["work_h"] == pytest.approx(WORK_S / 3600.0) and w["overhead_h"] == pytest.approx(0.2)
    assert doc["hindsight"]["note"] is None and doc["policy"] == DEFAULT_POLICY


def test_jobs_without_a_replayed_market_say_why_there_is_no_regret():
    no_trace = sdk.cost(_job({"trace": None, "zones": [ZONE]}))
    on_aws = sdk.cost(_job(MARKET, backend="aws"))
    for doc, why in ((no_trace, "market.trace: null"), (on_aws, "backend aws")):
        t = doc["totals"]
        assert t["optimum_usd"] is None and t["policies"] is None and t["regret"] is None
        assert why in doc["hindsight"]["note"] and doc["hindsight"]["window"] is None


def test_cost_cli_shows_the_regret_and_json_carries_it():
    job_id = _job(MARKET)
    runner = CliRunner()
    shown = runner.invoke(app, ["cost", job_id])
    assert shown.exit_code == 0, shown.output
    assert "hindsight in the job's window" in shown.stdout and f"{DEFAULT_POLICY} (this job's policy)" in shown.stdout
    assert "regret " in shown.stdout and "÷ optimum" in shown.stdout
    totals = json.loads(runner.invoke(app, ["cost", job_id, "--json"]).stdout)["totals"]
    assert {"optimum_usd", "policies", "regret"} <= set(totals) and totals["optimum_usd"] > 0
    none = runner.invoke(app, ["cost", _job({"trace": None})])
    assert "hindsight: none, the job has no replayed market" in none.stdout


def test_a_recorded_spec_this_version_cannot_read_keeps_the_ledger():
    job_id = _job(MARKET)
    sdk.db().update_job(job_id, spec_json=json.dumps({"name": "regret", "script": "train.py", "retired_field": 1}))
    doc = sdk.cost(job_id)
    assert doc["totals"]["spent_usd"] > 0 and doc["totals"]["regret"] is None
    assert "does not validate" in doc["hindsight"]["note"]
