"""A budget is a hard limit on the replay: the digits example with a $0.20 budget stops at $0.20.

With `work_h` the trace clock runs on the steps the runtime reports, and the local process
trains many steps between two looks of the controller. The replayed instance must stop at the
trace second its bill reaches the budget, not where the controller happened to look: each of
10 runs (at several `time_scale`s) spends the budget and never more than the budget plus half a
billing minimum. Before this held, every run spent $0.3213.

The job runs on a hollow attempt (spotfit/hollow/): the digits example's 20 epochs of 47 steps in
next to no time, far ahead of the modeled instance between two looks (often all of them before
the first). It stands at its last step until the budget's stop request, so it never ends by
itself before the controller has looked, whatever the machine's speed.
"""

from __future__ import annotations

import functools
import shutil
from datetime import datetime

import pytest
import yaml

from spotfit import sdk
from spotfit.market.replay import MarketReplay
from spotfit.market.trace import load_trace, resolve_trace
from tests.support.hollow_jobs import write_scenario
from tests.support.jobs import DIGITS

pytestmark = pytest.mark.slow
BUDGET_USD = 0.2
LAST_STEP = 20 * 47  # the example's `--epochs 20` of ceil(1500 / 32) steps
TIME_SCALES = (600, 60, 6000, 600, 60000, 600, 60, 6000, 600, 60000)


def _half_minimum_usd(spec: dict) -> float:
    market = spec["market"]
    return _half_minimum_at(market["trace"], market["zones"][0], market["start"])


@functools.cache  # the same in every run: the trace is read once (1.5 s)
def _half_minimum_at(trace: str, zone: str, start: str) -> float:
    replay = MarketReplay(load_trace(resolve_trace(trace)), [zone], 600.0, datetime.fromisoformat(start))
    return replay.cost_usd("spot", zone, replay.origin_s, replay.origin_s)[1] / 2


@pytest.mark.usefixtures("hollow")
@pytest.mark.parametrize("run", range(10))
def test_the_digits_example_stops_at_its_budget_in_10_runs_out_of_10(tmp_path, run):
    folder = tmp_path / "digits"
    shutil.copytree(DIGITS, folder)
    write_scenario(folder, DIGITS / "train.py", wait_for_stop_at=LAST_STEP)
    spec = yaml.safe_load((folder / "spotfit.yaml").read_text())
    spec["rules"] = [{"rule": "budget", "usd": BUDGET_USD, "action": "stop"}]
    spec["market"]["time_scale"] = TIME_SCALES[run]
    (folder / "spotfit.yaml").write_text(yaml.safe_dump(spec))
    doc = sdk.run_job(sdk.submit(str(folder / "spotfit.yaml")))
    limit = BUDGET_USD + _half_minimum_usd(spec)
    assert doc["state"] == "stopped", doc["message"]
    assert BUDGET_USD <= doc["cost_usd"] <= limit, (run, doc["cost_usd"], [a["cost_usd"] for a in doc["attempts"]])
    assert sum(a["cost_usd"] for a in doc["attempts"]) <= limit
    rules = [e for e in sdk.events(doc["id"]) if e["kind"] == "rule"]
    assert [e["data"]["rule"] for e in rules] == ["budget"]
