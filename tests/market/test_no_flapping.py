"""The default policy does not flap in the demo's market window (read from
examples/digits/spotfit.yaml: zone, start, deadline) nor in the demo's two earlier windows
(us-west-2b from 2023-02-19 19:02:01 and from 2023-02-27 21:55:31, 4 h deadline): between the
start of one outage and the start of the next it returns to spot at most once. In the demo's
window the first outage comes after 1.9 h of spot, so its jobs are at least 2 h of work."""

from __future__ import annotations

from datetime import datetime

import pytest

from spotfit.market.policies.base import Kind, make_policy
from spotfit.market.simulator import Job, simulate
from spotfit.market.trace import load_trace
from tests.market.demo_window import demo_spec, demo_window

EARLIER_STARTS = {"first": "2023-02-19T19:02:01", "previous": "2023-02-27T21:55:31"}
WORK_H = [1.0, 2.0, 3.0, 3.3, 3.6]


def _windows():
    trace, start = demo_window()
    for work_h in WORK_H[1:]:
        yield f"demo-{work_h}h", trace, start, demo_spec().deadline_h, work_h
    earlier = load_trace("aws-v100").select(["us-west-2b"])
    for name, when in EARLIER_STARTS.items():
        tick = round((datetime.fromisoformat(when) - earlier.start).total_seconds() / earlier.gap_s)
        for work_h in WORK_H:
            yield f"{name}-{work_h}h", earlier, tick, 4.0, work_h


@pytest.mark.parametrize("window", list(_windows()), ids=lambda w: w[0])
@pytest.mark.parametrize("overhead_h", [0.05, 0.2])
def test_at_most_one_return_to_spot_per_outage_in_the_demo_window(window, overhead_h):
    _, trace, start, deadline_h, work_h = window
    policy = make_policy("default")
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
