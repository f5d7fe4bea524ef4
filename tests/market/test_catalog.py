"""The bundled price catalogs, parsed by header and filtered."""

from __future__ import annotations

import pytest

from spotfit.errors import UsageError
from spotfit.market.catalog import load_catalog
from spotfit.market.gcp_vm_prices import latest_vm_prices


def test_filters_by_accelerator_count_cloud_region():
    offers = load_catalog(accelerator="v100", count=1, cloud="aws", region="us-east-1")
    assert offers and all(o.cloud == "aws" and o.region == "us-east-1" and o.count == 1 for o in offers)
    assert {o.instance_type for o in offers} == {"p3.2xlarge"}
    assert offers[0].on_demand_usd_per_h == pytest.approx(3.06)


def test_spot_filter_sorts_by_spot_price_and_reads_every_cloud():
    offers = load_catalog(accelerator="V100", spot=True)
    prices = [o.spot_usd_per_h for o in offers]
    assert None not in prices and prices == sorted(prices)
    assert {o.cloud for o in offers} == {"aws", "gcp", "azure"}


def test_unknown_cloud_lists_valid_ones():
    with pytest.raises(UsageError, match="aws, gcp, azure"):
        load_catalog(cloud="oracle")


def test_gcp_vm_rows_price_the_whole_machine_and_attachment_rows_say_they_do_not():
    a100 = load_catalog(accelerator="A100", count=8, cloud="gcp", region="us-central1")
    assert [o.instance_type for o in a100] == ["a2-highgpu-8g"] and a100[0].vm_included
    assert a100[0].on_demand_usd_per_h == pytest.approx(29.38708)  # the 2026-06 price of the 8-GPU VM
    t4 = load_catalog(accelerator="T4", count=1, cloud="gcp")
    assert t4 and not any(o.vm_included for o in t4)
    assert all(o.vm_included for o in load_catalog(cloud="aws") + load_catalog(cloud="azure"))


def _change(date, machine, region, od, spot, accelerator="", count=""):
    return {"snapshot_date_utc": f"{date}T00:00:00+00:00", "machine_type": machine, "accelerator": accelerator,
            "accelerator_count": count, "region": region, "hour_ondemand_usd": od, "hour_spot_usd": spot}


def test_gcp_vm_history_keeps_the_latest_whole_gpu_prices_still_tracked():
    rows = latest_vm_prices([
        _change("2026-05-01", "g2-standard-24", "us-east1", "2.1", "1.2", "l4", "2"),
        _change("2026-07-01", "g2-standard-24", "us-east1", "2.0", "1.1"),  # blank: labelled by the row above
        _change("2024-08-17", "a3-megagpu-8g", "us-east1", "10.1", "5.6"),  # not seen for a year: stale
        _change("2026-07-01", "g4-standard-12", "us-east1", "1.1", "0.4", "rtx6000", "0.25"),  # a GPU share
    ])
    assert [(r["InstanceType"], r["AcceleratorName"], r["AcceleratorCount"], r["Price"]) for r in rows] == [
        ("g2-standard-24", "L4", "2", "2.0")]
