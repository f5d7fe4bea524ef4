"""GCP prices: the Cloud Billing Catalog through the official client (a catalog served on 127.0.0.1), the bundled
catalog as the fallback, each saying which was used; and `plan` recommending GCP offers with `launch: yes`."""

from __future__ import annotations

import pytest

from spotfit.backends.base import LaunchRequest, LiveMarketSource
from spotfit.backends.gcp.backend import GcpBackend
from spotfit.backends.gcp.machines import machine_for
from spotfit.backends.gcp.prices import bundled_prices
from spotfit.market.offers import plan
from spotfit.market.policies.base import spot
from spotfit.state.states import Market
from tests.support.billing_api import BillingApi, n1_v100_skus

SKUS = n1_v100_skus(["us-central1"])


@pytest.fixture
def billing():
    api = BillingApi(SKUS)
    yield api
    api.stop()


def request(zone: str = "us-central1-a") -> LaunchRequest:
    return LaunchRequest(job_id="j", attempt=1, job_url="gs://b/j", zone=zone, market=Market.SPOT,
                         accelerator="V100", accelerator_count=1, decision=spot(zone))


def test_live_prices_from_the_billing_catalog(billing):
    gcp = GcpBackend(project="p-123456", billing_endpoint=billing.url)
    assert isinstance(gcp, LiveMarketSource)
    live = gcp.live_market(request(), ["us-central1-a", "us-central1-b"])
    assert live.zones == ["us-central1-a", "us-central1-b"]
    # n1-standard-8 (8 vCPUs, 30 GiB) + one V100, summed from the SKUs of the region
    assert live.on_demand_usd_per_h == pytest.approx(8 * 0.031611 + 30 * 0.004237 + 2.48)
    assert live.spot_usd_per_h("us-central1-a") == pytest.approx(8 * 0.00698 + 30 * 0.000936 + 0.992)
    assert live.source == "spot and on-demand from the Cloud Billing Catalog (Compute Engine SKUs)"
    assert billing.requests >= 4  # seven SKUs, two per page: the client paged


def test_the_bundled_catalog_when_the_billing_catalog_cannot_be_read():
    gcp = GcpBackend(project="p-123456", billing_endpoint="http://127.0.0.1:9")  # nothing listens there
    live = gcp.live_market(request(), ["us-central1-a"])
    expected = bundled_prices(machine_for("V100", 1, "us-central1-a"), "V100", 1, "us-central1")
    assert live.spot_usd_per_h("us-central1-a") == expected.spot_usd_per_h
    assert "the bundled catalog (1 × V100 only" in live.source and "could not be read" in live.source


def test_a_machine_the_billing_catalog_does_not_price_falls_back(billing):
    a100 = request()
    a100.accelerator = "A100"
    live = GcpBackend(project="p-123456", billing_endpoint=billing.url).live_market(a100, ["us-central1-a"])
    assert "has no price for a2-highgpu-1g in us-central1" in live.source
    a2 = machine_for("A100", 1, "us-central1-a")
    assert live.on_demand_usd_per_h == bundled_prices(a2, "A100", 1, "us-central1").on_demand_usd_per_h


def test_plan_recommends_gcp_with_launch_yes_when_it_is_cheapest():
    p = plan("A100", count=1, work_h=10, deadline_h=12, trace="aws-v100")
    gcp = [o for o in p.offers if o.cloud == "gcp"]
    assert gcp and all(o.launchable for o in gcp)
    assert p.recommended.cloud == "gcp" and p.recommended.launchable and not p.all_clouds
    assert p.recommended.instance_type == "a2-highgpu-1g"
