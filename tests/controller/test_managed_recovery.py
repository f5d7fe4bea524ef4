"""Managed recovery on the replayed market: preemptions, deadline, ledger, controller crash.

The replayed market runs on wall time while a job waits, so these tests do not count on the
machine's speed: the flaky job meets the market at known steps (its script waits there for the
market's preemption), decisions are checked against the trace at the trace times the controller
recorded, and every wait has a deadline. The deadline test's job trains on steps (`work_h`):
whether it finishes before its trace-time deadline does not depend on the machine's speed.

All three run hollow attempts (spotfit/hollow/): what they test is the controller's side of the
market. The runtime's side, a SIGTERM from the backend resumed at the exact step of a real Keras
script, is tests/runtime/test_exact_resume.py's (the same signals, sent by the same controller
through the same local backend), and tests/attempt/test_contract.py holds the hollow runtime to
the real one. A wrong resume step or a lost checkpoint still changes the hollow weights.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.market.policies.base import BasePolicy, Kind, make_policy
from spotfit.market.simulator import Job, simulate
from spotfit.market.trace import load_trace
from spotfit.state.states import AttemptState
from tests.support.hollow_jobs import reference, write_hollow_spec
from tests.support.jobs import spotfit_cmd
from tests.support.ledger import down_ticks, launch_cost_usd, tick_at
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).parent / "scripts" / "market_train.py"
HOLDS = (40, 90, 140)  # steps at which the flaky job waits for the market to preempt it
TOTAL = 4 * 47  # 4 epochs of 1500 samples in batches of 32

# us-east-2b from this start: up 52 ticks, down 23, up 68, down 23, up 55, down 3, up 58, down 3,
# up 152, down 7, up 883, ... Ticks of 195 s are 0.15 wall seconds at time_scale 1300. An
# attempt's start-up holds the clock, which passes the 1 h overhead (18.5 ticks) at once when it
# trains: the first three attempts then train 33.5, 49.5 and 36.5 ticks (5, 7.4 and 5.5 wall
# seconds) before the zone goes down, many times what the 40-50 steps to their hold take, so
# each hold meets the next outage. (An attempt that missed its hold would meet it at a later
# outage: the checks below hold either way.)
FLAKY = f"""
name: flaky
script: market_train.py
args: ["--epochs", "4", "--wait-for-market-at", "{','.join(map(str, HOLDS))}"]
market: {{trace: aws-v100, zones: [us-east-2b], start: "2023-03-08T08:56:31", time_scale: 1300,
          policy: greedy, overhead_h: 1.0}}
checkpoint: {{interval: {{steps: 25}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
"""
# us-east-1a has no spot for 60 ticks (3.25 h) from this start. With `work_h` the attempt's
# training advances the trace by steps and its start-up holds the clock, so the finish in trace
# time does not depend on this machine's speed; time_scale only sets how fast the policy's
# waiting passes: the 12 ticks it waits are 6 wall seconds at 400.
DRY_START = datetime(2023, 2, 16, 12, 19, 46, tzinfo=UTC)
DRY = """
name: dry
script: train.py
args: ["--epochs", "6"]
market: {trace: aws-v100, zones: [us-east-1a], start: "2023-02-16T12:19:46", time_scale: 400,
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


def _check_ledger(job_id: str, zone: str) -> dict:
    """The ledger bills each attempt for the span it shows, at the trace's prices, to the cent."""
    ledger = _json("cost", job_id)
    rows = ledger["rows"]
    recomputed = 0.0
    for r in rows:
        assert r["billed_s"] == pytest.approx(max(r["end_s"] - r["start_s"], 60.0), abs=1e-3), r
        expected = launch_cost_usd(r["market"], r["zone"] or zone, r["start_s"], r["end_s"])
        assert abs(r["cost_usd"] - expected) < 1e-6, (r, expected)  # one accounting; rows are rounded to 1e-6
        recomputed += expected
    assert abs(ledger["totals"]["spent_usd"] - recomputed) < 0.005, (ledger["totals"], recomputed)
    assert sum(r["cost_usd"] for r in rows) == pytest.approx(ledger["totals"]["spent_usd"], abs=1e-5)
    totals = ledger["totals"]
    assert totals["savings_usd"] == pytest.approx(totals["on_demand_usd"] - totals["spent_usd"], abs=1e-5)
    numbers = [r["attempt"] for r in rows]
    assert numbers == sorted(set(numbers))  # no attempt billed twice
    return ledger


def test_replayed_preemptions_recover_to_the_same_weights_and_ledger_adds_up(tmp_path, hollow):
    doc = _json("run", str(write_hollow_spec(tmp_path / "flaky", FLAKY, SCRIPT)))
    base = reference(SCRIPT, ["--epochs", "4"], seed=0)
    assert base["step"] == TOTAL
    assert doc["state"] == "completed" and doc["step"] == TOTAL, doc
    assert doc["weights_sha256"] == base["weights_sha256"]

    # Launches that found the zone gone in the instant between deciding and launching are not billed.
    attempts = [a for a in doc["attempts"] if a["state"] != AttemptState.NO_CAPACITY]
    ended_by_market = [a for a in attempts if a["state"] in (AttemptState.PREEMPTED, AttemptState.KILLED)]
    assert [a["state"] for a in attempts] == [a["state"] for a in ended_by_market] + ["completed"]
    assert len(ended_by_market) >= len(HOLDS), [a["state"] for a in attempts]  # at least one per hold
    assert {a["market"] for a in attempts} == {"spot"}
    # Each of them ended on a notice that the trace gave: the zone went down during the attempt.
    notices = {e["attempt"]: e for e in _json("logs", doc["id"])["events"] if e["kind"] == "preemption_notice"}
    for a in ended_by_market:
        notice_s = notices[a["number"]]["data"]["trace_s"]
        assert a["trace_start_s"] <= notice_s <= a["trace_end_s"]
        assert down_ticks("us-east-2b", a["trace_start_s"], notice_s), (a, notice_s)
    # Every hold step was reached once, and the attempt holding there was the one preempted.
    assert set(HOLDS) <= {a["end_step"] for a in ended_by_market}

    ledger = _check_ledger(doc["id"], "us-east-2b")
    assert ledger["totals"]["restart_overhead_s"] > 0


class _Recording(BasePolicy):
    """A policy that records what the wrapped one decides, tick by tick."""

    name = "recording"
    multi_zone = True

    def __init__(self, name: str):
        self.inner, self.seen = make_policy(name), []

    def reset(self) -> None:
        self.inner.reset()
        self.seen.clear()

    def decide(self, ctx):
        decision = self.inner.decide(ctx)
        self.seen.append((round(ctx.now_s / ctx.gap_s), decision))
        return decision


@pytest.mark.usefixtures("hollow")
def test_tight_deadline_on_a_dry_zone_switches_to_on_demand_and_finishes_in_time(tmp_path):
    # Offline first: for this job on this trace the default policy's first launch is on-demand,
    # since spot is gone for 3.25 h and the deadline is 2.5 h (it may wait while the slack
    # still affords a later on-demand launch: waiting is free until then).
    trace = load_trace("aws-v100")
    start_tick = tick_at("us-east-1a", DRY_START.timestamp())
    policy = _Recording("default")
    run = simulate(policy, trace, Job.from_hours(0.8, 2.5, 0.5), start_tick, ("us-east-1a",))
    first_tick, first = next((t, d) for t, d in policy.seen if d.kind is not Kind.NONE)
    assert run.met_deadline and first.kind is Kind.ON_DEMAND and run.launches == 1

    doc = _json("run", str(write_hollow_spec(tmp_path / "dry", DRY)))
    assert doc["state"] == "completed", doc
    assert [a["market"] for a in doc["attempts"]] == ["on_demand"]
    launch = next(e for e in _json("logs", doc["id"])["events"] if e["kind"] == "launch")
    # The controller launched it in the tick the policy chose, after recording the attempt.
    assert tick_at("us-east-1a", launch["data"]["trace_s"]) == start_tick + first_tick
    assert launch["data"]["trace_s"] >= doc["attempts"][0]["trace_start_s"] >= DRY_START.timestamp()
    finish_h = (doc["attempts"][-1]["trace_end_s"] - DRY_START.timestamp()) / 3600.0
    assert finish_h <= 2.5, f"finished at {finish_h:.2f} h, deadline 2.5 h"
    _check_ledger(doc["id"], "us-east-1a")


@pytest.mark.usefixtures("hollow")
def test_controller_killed_mid_job_resumes_without_duplicate_attempts(tmp_path):
    """The attempt holds in step 101 (it writes `marks/paused`, waits for `marks/go`) until the new
    controller has adopted it: it is still running, whatever the machine's speed."""
    marks = tmp_path / "marks"
    marks.mkdir()
    spec = write_hollow_spec(tmp_path / "calm", CALM.format(epochs=4), pause_at=101, pause_dir=str(marks))
    out = _cli("run", str(spec), "--detach", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    job_id = json.loads(out.stdout)["id"]
    doc = wait_for(lambda: (d := _json("status", job_id))["step"] >= 100 and d, 300, "the job to reach step 100")
    assert doc["controller"] == "alive", doc
    os.kill(sdk.db().find_job(job_id)["controller_pid"], signal.SIGKILL)
    wait_for(lambda: _json("status", job_id)["controller"] == "gone", 60, "the killed controller to be seen as gone")
    resumed = subprocess.Popen(spotfit_cmd("resume", job_id, "--json"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, env=os.environ.copy())
    try:
        wait_for(lambda: any(e["kind"] == "adopted" for e in sdk.events(job_id)) or resumed.poll() is not None,
                 300, "`spotfit resume` to adopt the running attempt")
        (marks / "go").touch()
        out_text, err = resumed.communicate(timeout=600)
    finally:
        if resumed.poll() is None:
            resumed.kill()
            resumed.wait()
    assert resumed.returncode == 0, err[-3000:]
    final = json.loads(out_text)
    assert final["state"] == "completed", final
    assert len(final["attempts"]) == 1  # the running attempt was adopted, not relaunched
    assert final["attempts"][0]["state"] == "completed"
    events = _json("logs", job_id)["events"]
    assert any(e["kind"] == "adopted" for e in events)
    _check_ledger(job_id, "us-west-2a")
