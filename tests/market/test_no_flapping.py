"""The default policy does not flap in the demo's market window (read from
examples/digits/spotfit.yaml: zone, start, deadline) nor in the demo's earlier window
(us-west-2b from 2023-02-19 19:02:01, 4 h deadline): between the start of one outage and the
start of the next it returns to spot at most once."""

from __future__ import annotations

from datetime import datetime

import pytest

from spotfit.market.policies.base import Kind, make_policy
from spotfit.market.simulator import Job, simulate
from spotfit.market.trace import load_trace
from tests.market.demo_window import demo_spec, demo_window

EARLIER_START = datetime.fromisoformat("2023-02-19T19:02:01")


def _windows():
    trace, start = demo_window()
    yield "demo", trace, start, demo_spec().deadline_h
    earlier = load_trace("aws-v100").select(["us-west-2b"])
    yield "earlier", earlier, round((EARLIER_START - earlier.start).total_seconds() / earlier.gap_s), 4.0


@pytest.mark.parametrize("window", list(_windows()), ids=lambda w: w[0])
@pytest.mark.parametrize("work_h", [1.0, 2.0, 3.0, 3.3, 3.6])
@pytest.mark.parametrize("overhead_h", [0.05, 0.2])
def test_at_most_one_return_to_spot_per_outage_in_the_demo_window(window, work_h, overhead_h):
    _, trace, start, deadline_h = window
    policy = make_policy("spotfit")
    kinds: list[Kind] = []
    decide = policy.decide
    policy.decide = lambda ctx: kinds.append((d := decide(ctx)).kind) or d  # type: ignore[method-assign]
    run = simulate(policy, trace, Job.from_hours(work_h, deadline_h, overhead_h), start)
    assert run.met_deadline
    up = trace.available[0, start:start + len(kinds)]
    outage_starts = [t for t in range(1, len(kinds)) if up[t - 1] and not up[t]]
    assert outage_starts, "the window must contain an outage"
    returns = [t for t in range(1, len(kinds)) if kinds[t] is Kind.SPOT and kinds[t - 1] is not Kind.SPOT]
    bounds = [*outage_starts, len(kinds)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        assert sum(a <= t < b for t in returns) <= 1, (work_h, "".join(k.value[0] for k in kinds))
