"""GCP GPU VM prices: a history of price changes reduced to today's catalog rows.

GCP's A100, H100 and L4 machine types (`a2-*`, `a3-*`, `g2-*`) bundle their GPUs, so the VM
price is the whole price. The history (`gcp_gpu_vm_price_changes.csv`, one row per change,
columns `snapshot_date_utc,...,machine_type,accelerator,accelerator_count,region,
hour_ondemand_usd,hour_spot_usd`; source Cyclenerd/google-cloud-pricing-cost-calculator,
Apache-2.0) is reduced to the latest price per machine type and region, in SkyPilot's catalog
layout. Rows whose accelerator is blank take it from other rows of the same machine type, or
from the machine type's name (`a3-highgpu-8g`: 8 × H100). Left out: machine types with a
fraction of a GPU (the planner ranks whole accelerators), and prices last changed more than
`STALE_DAYS` before the newest snapshot: spot prices change every month or two, so a price
that has not changed for a year is one the source stopped tracking (in the 2026-07 file: the
`a3-megagpu-8g` rows of 2024-08 at about $10/h for 8 H100, and northamerica-northeast2's
`a2` rows of 2023-05).

The bundled `gcp_gpu_vm_prices.csv` was written with::

    python -m spotfit.market.gcp_vm_prices gcp_gpu_vm_price_changes.csv spotfit/data/gcp_gpu_vm_prices.csv

Example:

>>> rows = latest_vm_prices([
...     {"snapshot_date_utc": "2026-06-01T00:00:00+00:00", "machine_type": "a3-highgpu-8g",
...      "accelerator": "", "accelerator_count": "", "region": "us-central1",
...      "hour_ondemand_usd": "90.0", "hour_spot_usd": "50.0"},
...     {"snapshot_date_utc": "2026-07-01T00:00:00+00:00", "machine_type": "a3-highgpu-8g",
...      "accelerator": "", "accelerator_count": "", "region": "us-central1",
...      "hour_ondemand_usd": "88.49", "hour_spot_usd": ""}])
>>> rows[0]["AcceleratorName"], rows[0]["AcceleratorCount"], rows[0]["Price"], rows[0]["SpotPrice"]
('H100', '8', '88.49', '')
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Region", "Price", "SpotPrice", "PriceDate")
STALE_DAYS = 365
_BY_NAME = {  # machine families whose history rows carry no accelerator: the name tells it
    re.compile(r"a3-megagpu-(\d+)g"): "H100-MEGA",
    re.compile(r"a3-(?:high|edge)gpu-(\d+)g"): "H100",
}


def latest_vm_prices(history: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest on-demand and spot price per (machine type, region), as catalog rows."""
    rows = list(history)
    labels = {r["machine_type"]: (r["accelerator"].upper(), r["accelerator_count"])
              for r in rows if r["accelerator"] and r["accelerator_count"]}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["machine_type"], r["region"])
        when = datetime.fromisoformat(r["snapshot_date_utc"])
        if key not in latest or when >= latest[key]["_when"]:
            latest[key] = {**r, "_when": when}
    if not latest:
        return []
    newest = max(r["_when"] for r in latest.values())
    out = []
    for (machine, region), r in sorted(latest.items()):
        accelerator, count = labels.get(machine) or _from_name(machine) or ("", "")
        if not accelerator or float(count) < 1 or (newest - r["_when"]).days > STALE_DAYS:
            continue
        out.append({"InstanceType": machine, "AcceleratorName": accelerator, "AcceleratorCount": count,
                    "Region": region, "Price": r["hour_ondemand_usd"], "SpotPrice": r["hour_spot_usd"],
                    "PriceDate": r["_when"].date().isoformat()})
    return out


def _from_name(machine: str) -> tuple[str, str] | None:
    for pattern, accelerator in _BY_NAME.items():
        match = pattern.fullmatch(machine)
        if match:
            return accelerator, match.group(1)
    return None


def main(src: str, dst: str) -> None:
    with open(src, newline="", encoding="utf-8") as fh:
        rows = latest_vm_prices(csv.DictReader(fh))
    with open(dst, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main(*sys.argv[1:3])
