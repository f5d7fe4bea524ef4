"""Price catalogs: GPU offers (on-demand and spot $/h per region and zone) in SkyPilot's layout.

The bundled catalogs (`aws`, `gcp`, `azure`) are parsed by header name, since the column
order differs per cloud. AWS and Azure prices are whole instances. GCP has two kinds of rows:
whole VMs with their GPUs (A100, H100, L4 machine types, from `gcp_gpu_vm_prices.csv`) and
GPU attachments (T4, P4, V100 on N1 hosts, `gcp_gpu_subset_v8.csv`), whose host VM is extra and
not in any bundled catalog: those carry `vm_included=False`.

Example:

>>> offers = load_catalog(accelerator="V100", count=1, cloud="aws", region="us-east-1", spot=True)
>>> offers[0].instance_type, offers[0].spot_usd_per_h is not None
('p3.2xlarge', True)
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from spotfit.errors import TraceError, UsageError
from spotfit.market.data_dir import DATA_DIR

CATALOGS = {
    "aws": ("aws_gpu_subset_v8.csv",),
    "gcp": ("gcp_gpu_vm_prices.csv", "gcp_gpu_subset_v8.csv"),
    "azure": ("azure_gpu_subset_v6.csv",),
}
_GPU_ONLY = {"gcp_gpu_subset_v8.csv"}  # GPU attachment prices: the host VM is extra
_REQUIRED = ("AcceleratorName", "AcceleratorCount", "Price", "Region")


@dataclass(frozen=True)
class CatalogOffer:
    """One row of a catalog: where an accelerator can run and what it costs per hour."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str | None
    accelerator: str
    count: float
    on_demand_usd_per_h: float | None
    spot_usd_per_h: float | None
    vm_included: bool = True  # False: the price is the GPU attachment only, the host VM is extra

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load_catalog(accelerator: str | None = None, count: float | None = None,
                 cloud: str | None = None, region: str | None = None,
                 spot: bool = False) -> list[CatalogOffer]:
    """Offers of the bundled catalogs, filtered; sorted by spot (if `spot`) or on-demand price."""
    if cloud is not None and cloud.lower() not in CATALOGS:
        raise UsageError(f"Unknown cloud {cloud!r}: expected one of {', '.join(CATALOGS)}.",
                         hint="Pass --cloud aws, gcp or azure, or omit it.")
    clouds = [cloud.lower()] if cloud else list(CATALOGS)
    offers = [o for c in clouds for name in CATALOGS[c] for o in read_catalog(DATA_DIR / name, c)]
    if accelerator:
        offers = [o for o in offers if o.accelerator.lower() == accelerator.lower()]
    if count is not None:
        offers = [o for o in offers if o.count == count]
    if region:
        offers = [o for o in offers if o.region == region]
    if spot:
        offers = [o for o in offers if o.spot_usd_per_h is not None]
    key = (lambda o: o.spot_usd_per_h) if spot else (lambda o: o.on_demand_usd_per_h or float("inf"))
    return sorted(offers, key=key)


@lru_cache(maxsize=8)
def read_catalog(path: Path, cloud: str) -> tuple[CatalogOffer, ...]:
    """Every row of one catalog CSV, columns found by header name."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"Malformed catalog {path}: missing column(s) {', '.join(missing)}; "
                             f"expected SkyPilot catalog columns {', '.join(_REQUIRED)}.",
                             hint="Use a catalog in SkyPilot's CSV layout.")
        out = []
        for n, row in enumerate(reader, start=2):
            try:
                out.append(CatalogOffer(
                    cloud=cloud,
                    region=row["Region"],
                    zone=row.get("AvailabilityZone") or None,
                    instance_type=row.get("InstanceType") or None,
                    accelerator=row["AcceleratorName"],
                    count=float(row["AcceleratorCount"]),
                    on_demand_usd_per_h=_price(row.get("Price")),
                    spot_usd_per_h=_price(row.get("SpotPrice")),
                    vm_included=path.name not in _GPU_ONLY,
                ))
            except ValueError:
                raise TraceError(f"Malformed catalog {path}: row {n} has a bad number; expected "
                                 "numbers in AcceleratorCount, Price and SpotPrice.",
                                 hint="Fix that row.") from None
    return tuple(out)


def _price(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None
