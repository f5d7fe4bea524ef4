"""The planner ranks offers by expected cost simulated over the market history."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from spotfit.errors import UsageError
from spotfit.market.offers import AVAILABILITY_PRIOR, launchable_clouds, plan
from spotfit.market.policies.base import DEFAULT_POLICY
from spotfit.market.simulator import Job, simulate, start_ticks
from spotfit.market.trace import load_trace, zone_stats


def test_plan_ranks_history_offers_with_expected_figures():
    p = plan("V100", count=1, work_h=10, deadline_h=12, starts=2)
    costs = [o.expected_cost_usd for o in p.offers]
    assert costs == sorted(costs) and [o.rank for o in p.offers] == list(range(1, len(costs) + 1))
    history = [o for o in p.offers if o.basis == "history"]
    assert len(history) == 10  # nine zones and all of them together
    best = p.recommended
    assert best.basis == "history" and best.policy == DEFAULT_POLICY and best.expected_preemptions is not None
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


def test_the_v100_trace_never_prices_an_a100_offer():
    p = plan("A100", count=8, work_h=10, deadline_h=12, trace="aws-v100")
    assert p.offers and p.trace is None
    assert {o.basis for o in p.offers} == {"catalog"}
    assert all(o.availability_prior == AVAILABILITY_PRIOR and o.expected_preemptions is None for o in p.offers)
    assert all(o.on_demand_usd_per_h > 20 for o in p.offers)  # 8 × A100 machines, not the V100's $3.06/h
    assert any("records no A100×8 offer" in note for note in p.notes)


def test_an_explicit_trace_of_another_accelerator_is_a_usage_error():
    with pytest.raises(UsageError, match="records no A100×8 offer") as err:
        plan("A100", count=8, work_h=10, deadline_h=12, trace="aws-v100", trace_required=True)
    assert "--trace" in err.value.hint


def test_the_prior_is_the_lowest_zone_availability_of_the_bundled_history():
    lowest = min(s.availability for s in zone_stats(load_trace("aws-v100")))
    assert AVAILABILITY_PRIOR == round(lowest, 2)


def test_catalog_offers_cost_the_prior_mix_of_spot_and_on_demand():
    p = plan("V100", count=1, work_h=10, deadline_h=12, zones=["us-west-2b"], starts=1)
    hours = 10 + 0.2  # the work and one start-up
    catalog = [o for o in p.offers if o.basis == "catalog"]
    assert catalog
    for o in catalog:
        rate = AVAILABILITY_PRIOR * o.spot_usd_per_h + (1 - AVAILABILITY_PRIOR) * o.on_demand_usd_per_h
        assert o.expected_cost_usd == pytest.approx(rate * hours)
    # The trace's region is simulated, not priced from the catalog as well.
    assert not [o for o in catalog if o.cloud == "aws" and o.region == "us-west-2"]


def test_clouds_without_a_backend_are_marked_and_not_recommended_unless_asked():
    p = plan("A100", count=8, work_h=10, deadline_h=12)
    assert launchable_clouds() == ["aws", "gcp"]
    marked = {o.cloud for o in p.offers if not o.launchable}
    assert marked == {"azure"}
    assert p.recommended.cloud == "aws"
    # L4 × 1: a GCP g2 VM is cheaper than any AWS offer, and GCP has a backend: it is recommended.
    l4 = plan("L4", count=1, work_h=10, deadline_h=12)
    assert l4.offers[0].cloud == "gcp" and l4.recommended.cloud == "gcp" and l4.recommended.launchable
    anywhere = plan("L4", count=1, work_h=10, deadline_h=12, all_clouds=True)
    assert anywhere.recommended == anywhere.offers[0] and anywhere.recommended.cloud == "gcp"


def test_gcp_offers_carry_the_vm_price_and_gpu_only_rows_are_left_out():
    p = plan("A100", count=1, work_h=10, deadline_h=12)  # GCP is launchable: its rows compete with AWS's
    gcp = [o for o in p.offers if o.cloud == "gcp"]
    assert gcp and all(o.instance_type.startswith("a2-") and o.on_demand_usd_per_h > 3 for o in gcp)
    v100 = plan("V100", count=1, work_h=4, deadline_h=5, zones=["us-west-2b"], starts=1, all_clouds=True)
    assert not [o for o in v100.offers if o.cloud == "gcp"]
    assert any("GPU attachment only" in note for note in v100.notes)


def test_a_start_outside_the_trace_and_a_bad_policy_are_usage_errors():
    with pytest.raises(UsageError, match="expected a time inside the trace"):
        plan("V100", work_h=4, deadline_h=5, start=datetime(2024, 1, 1))
    with pytest.raises(UsageError, match="Invalid `market.policy`: received 'fastest'"):
        plan("V100", work_h=4, deadline_h=5, policy="fastest")
    with pytest.raises(UsageError, match="offline bound"):
        plan("V100", work_h=4, deadline_h=5, policy="optimum")


@pytest.mark.parametrize("policy, offers", [("greedy", 3), ("on_demand", 2)])
def test_the_job_policy_is_the_one_simulated(policy, offers):
    p = plan("V100", work_h=4, deadline_h=5, zones=["us-west-2b", "us-east-1a"], policy=policy, starts=1)
    history = [o for o in p.offers if o.basis == "history"]
    assert {o.policy for o in history} == {policy} and p.policy == policy
    # greedy takes several zones together (one more offer over both); on_demand is single-zone
    assert len(history) == offers


def test_history_offers_show_the_risk_over_the_windows_simulated():
    # us-east-1a has spot 17% of the time, the zone where spot is the hardest bet to win.
    zone, job = "us-east-1a", Job.from_hours(3, 4, 0.2)
    p = plan("V100", work_h=3, deadline_h=4, zones=[zone], starts=8)
    (offer,) = [o for o in p.offers if o.basis == "history"]
    trace = load_trace("aws-v100").select([zone])
    ticks = start_ticks(trace, job, 8)
    costs = [simulate(DEFAULT_POLICY, trace, job, s).cost_usd for s in ticks]
    on_demand = [simulate("on_demand", trace, job, s).cost_usd for s in ticks]
    assert offer.cost_p10_usd == pytest.approx(float(np.percentile(costs, 10)))
    assert offer.cost_p90_usd == pytest.approx(float(np.percentile(costs, 90)))
    assert offer.worst_cost_usd == pytest.approx(max(costs))
    above = [c > o + 1e-9 for c, o in zip(costs, on_demand, strict=True)]
    assert offer.above_on_demand_share == pytest.approx(np.mean(above))
    assert offer.cost_p10_usd <= offer.cost_p90_usd <= offer.worst_cost_usd
    # The default floor: no window costs more than 1.05 × all-on-demand from its start.
    assert all(c <= 1.05 * o + 1e-9 for c, o in zip(costs, on_demand, strict=True))
    catalog = [o for o in p.to_json()["offers"] if o["basis"] == "catalog"]
    assert catalog and all(o["worst_cost_usd"] is None and o["above_on_demand_share"] is None for o in catalog)
