"""The planner ranks offers by expected cost simulated over the market history."""

from __future__ import annotations

from datetime import datetime

import pytest

from spotfit.errors import UsageError
from spotfit.market.offers import plan


def test_plan_ranks_history_offers_with_expected_figures():
    p = plan("V100", count=1, work_h=10, deadline_h=12, starts=2)
    costs = [o.expected_cost_usd for o in p.offers]
    assert costs == sorted(costs) and [o.rank for o in p.offers] == list(range(1, len(costs) + 1))
    history = [o for o in p.offers if o.basis == "history"]
    assert len(history) == 10  # nine zones and all of them together
    best = p.recommended
    assert best.basis == "history" and best.policy == "spotfit" and best.expected_preemptions is not None
    assert best.deadline_met_share == 1.0 and best.finish_h <= 12
    assert p.to_json()["recommended"]["rank"] == 1


def test_plan_uses_only_history_before_the_start_and_given_zones():
    p = plan("V100", work_h=4, deadline_h=5, zones=["us-west-2b"], start=datetime(2023, 2, 19, 19, 2))
    (zone_offer,) = [o for o in p.offers if o.basis == "history"]
    assert zone_offer.zones == ["us-west-2b"] and zone_offer.finish_at is not None


def test_on_demand_plan_has_no_spot_history():
    p = plan("V100", work_h=4, deadline_h=5, spot=False)
    assert {o.policy for o in p.offers} == {"on_demand"} and p.trace is None


def test_unknown_accelerator_is_a_usage_error():
    with pytest.raises(UsageError, match="accelerator 'Z9000'") as err:
        plan("Z9000", work_h=1)
    assert "spotfit catalog" in err.value.hint
