"""The replayed market bills like a cloud: a local job and `spotfit simulate` agree.

With `work_h` the replay counts trace time by training steps (work_h / total_steps each) and
holds its clock while a local process starts, restores and winds down; each launch costs the
modeled `market.overhead_h`. So a replayed job is deterministic in trace time, whatever the
machine's speed or load, and must make the simulator's launches at the simulator's ticks. The job
runs on hollow attempts (spotfit/hollow/), whose steps take next to no time: each attempt runs far
ahead of the modeled instance, and the launches, the finish and the bill must not move.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spotfit.market.policies.base import BasePolicy, Kind, make_policy
from spotfit.market.simulator import Job, simulate
from spotfit.market.trace import load_trace
from tests.support.hollow_jobs import write_hollow_spec
from tests.support.jobs import spotfit_cmd
from tests.support.ledger import GAP_S, launch_cost_usd, ticks

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).parent / "scripts" / "market_train.py"
ZONE = "us-east-1f"
START = datetime(2023, 3, 19, 17, 43, 31, tzinfo=UTC)  # a tick start; spot up 1 tick, down 4, then up 38+
WORK_H, DEADLINE_H, OVERHEAD_H = 2.0, 3.0, 0.2
SPEC = f"""
name: parity
script: market_train.py
args: ["--epochs", "4"]
market: {{trace: aws-v100, zones: [{ZONE}], start: "{START.strftime('%Y-%m-%dT%H:%M:%S')}", time_scale: 2000,
          overhead_h: {OVERHEAD_H}}}
checkpoint: {{interval: {{steps: 25}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
work_h: {WORK_H}
deadline_h: {DEADLINE_H}
"""


class _Launches(BasePolicy):
    """The default policy, recording each launch (tick since the start, what) it makes."""

    name = "launches"

    def __init__(self):
        self.inner, self.launches = make_policy("default"), []

    def reset(self) -> None:
        self.inner.reset()
        self.launches = []

    def decide(self, ctx):
        decision = self.inner.decide(ctx)
        if decision.kind is not Kind.NONE and decision != ctx.mode:
            self.launches.append((round(ctx.now_s / ctx.gap_s), str(decision)))
        return decision


def _simulated():
    trace = load_trace("aws-v100")
    start_tick = round((START.timestamp() - trace.start.replace(tzinfo=UTC).timestamp()) / trace.gap_s)
    policy = _Launches()
    run = simulate(policy, trace, Job.from_hours(WORK_H, DEADLINE_H, OVERHEAD_H), start_tick, (ZONE,))
    return run, policy.launches


@pytest.mark.usefixtures("hollow")
def test_a_replayed_job_makes_the_simulators_launches_at_its_cost(tmp_path):
    run, sim_launches = _simulated()
    assert run.met_deadline and len(sim_launches) >= 2, (run, sim_launches)  # the window has a preemption

    out = subprocess.run(spotfit_cmd("run", str(write_hollow_spec(tmp_path / "parity", SPEC, SCRIPT)), "--json"),
                         capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                         env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "completed", doc
    attempts = doc["attempts"]

    # The same launches, at the same ticks: each attempt starts at a tick start of the trace.
    origin = START.timestamp()
    launches = [((a["trace_start_s"] - origin) / GAP_S,
                 f"spot:{a['zone']}" if a["market"] == "spot" else "on_demand") for a in attempts]
    assert [(round(t), what) for t, what in launches] == sim_launches, (launches, sim_launches)
    assert all(abs(t - round(t)) < 1e-9 for t, _ in launches), launches

    # The same finish: the modeled start-ups and steps, never this machine's start-up.
    finish_s = attempts[-1]["trace_end_s"] - origin
    assert finish_s / 3600.0 == pytest.approx(run.finish_h, abs=1e-6)

    # The same cost but for one difference: the simulator bills the last tick in full, the
    # replay (as a cloud) to the second (here about 1% of the total). Everything else is
    # billed identically: whole ticks at the trace's prices, the overhead of every launch.
    spent = sum(a["cost_usd"] for a in attempts)
    last_tick_end_s = math.ceil(finish_s / GAP_S - 1e-9) * GAP_S
    last = attempts[-1]
    unbilled = launch_cost_usd(last["market"], last["zone"] or ZONE, origin + finish_s, origin + last_tick_end_s)
    assert spent + unbilled == pytest.approx(run.cost_usd, rel=1e-9), (spent, unbilled, run.cost_usd)
    assert 0 <= unbilled <= GAP_S / 3600.0 * max(t.spot_usd_per_h for t in ticks(ZONE))
