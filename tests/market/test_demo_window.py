"""`make demo` must save money: the default policy (and `rollout`) in the demo's own window (read from
examples/digits/spotfit.yaml) beats all on-demand with a regret (cost ÷ hindsight optimum) of at
most 1.3, at the restart overhead the demo's replay measures (`market.overhead_h`, 0.2 h: the
replay's clock holds through the local start-up, so the measured overhead is the modeled one) and
at nearby ones; and the real demo, run end to end as the Makefile runs it, prints the same."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from spotfit.market.simulator import Job, simulate
from tests.market.demo_window import DEMO_SPEC, demo_spec, demo_window
from tests.support.jobs import spotfit_cmd

MAX_REGRET = 1.3


@pytest.mark.parametrize("policy", ["default", "rollout"])
@pytest.mark.parametrize("overhead_h", [0.05, 0.1, 0.2])
def test_default_policy_saves_in_the_demo_window(policy, overhead_h):
    spec = demo_spec()
    trace, start = demo_window(spec)
    assert spec.work_h and spec.deadline_h
    job = Job.from_hours(spec.work_h, spec.deadline_h, overhead_h)
    runs = {p: simulate(p, trace, job, start) for p in (policy, "on_demand", "optimum")}
    assert runs[policy].met_deadline
    assert runs[policy].cost_usd < runs["on_demand"].cost_usd, runs
    assert runs[policy].cost_usd <= MAX_REGRET * runs["optimum"].cost_usd, runs


@pytest.mark.slow
def test_make_demo_saves_with_a_small_regret(spotfit_home):
    def cli(*args: str) -> subprocess.CompletedProcess:
        out = subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=900,
                             stdin=subprocess.DEVNULL, env=os.environ.copy())
        assert out.returncode == 0, out.stderr[-3000:]
        return out

    cli("run", str(DEMO_SPEC))  # as `make demo` does
    printed = cli("cost", demo_spec().name).stdout
    totals = json.loads(cli("cost", demo_spec().name, "--json").stdout)["totals"]
    assert totals["savings_usd"] > 0 and totals["savings_pct"] > 0, printed
    assert totals["regret"] is not None and totals["regret"] <= MAX_REGRET, printed
