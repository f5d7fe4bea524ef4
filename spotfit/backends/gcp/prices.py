"""What a GCP VM costs per hour, spot and on-demand: the Cloud Billing Catalog live, the bundled catalog else.

Compute Engine prices a VM by its parts, per region: vCPUs and memory of its machine family and
its GPUs, each a SKU of the Compute Engine service (`services/6F81-5844-456A`) with an
`OnDemand` and a `Preemptible` (spot) usage type. `price_from_skus` adds the parts up for the
machine types spotfit launches (`SHAPES`: vCPUs and GiB per machine type; A2/A3/G2 bundle their
GPUs, whose SKUs are added too); `live_prices` reads the SKUs with the official
`google-cloud-billing` client (REST) and keeps them for an hour.

When the catalog cannot be read (no credentials, no Billing API, a machine type without a shape
here), `bundled_prices` answers from the bundled catalog: the whole VM for A2/A3/G2, and for an
N1 host with attached GPUs only the GPUs (the bundled catalog has no N1 host prices, which the
`source` then says). `VmPrices.source` always says which was used.

Example:

>>> skus = [Sku("N1 Predefined Instance Core running in Americas", "OnDemand", ("us-central1",), 0.0316),
...         Sku("N1 Predefined Instance Ram running in Americas", "OnDemand", ("us-central1",), 0.0042),
...         Sku("Nvidia Tesla V100 GPU running in Americas", "OnDemand", ("us-central1",), 2.48)]
>>> round(price_from_skus(skus, "n1-standard-8", "V100", 1, "us-central1", spot=False), 4)
2.8588
>>> price_from_skus(skus, "n1-standard-8", "V100", 1, "us-central1", spot=True) is None
True
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spotfit.backends.gcp.machines import ATTACHED, Machine

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

COMPUTE_SERVICE = "services/6F81-5844-456A"
BILLING_ENDPOINT_ENV = "SPOTFIT_GCP_BILLING_ENDPOINT"
GPU_SKUS = {"V100": "Nvidia Tesla V100 GPU", "T4": "Nvidia Tesla T4 GPU", "P100": "Nvidia Tesla P100 GPU",
            "P4": "Nvidia Tesla P4 GPU", "A100": "Nvidia Tesla A100 GPU", "A100-80GB": "Nvidia A100 80GB GPU",
            "H100": "Nvidia H100 80GB GPU", "L4": "Nvidia L4 GPU"}
_SHAPES = (  # machine type pattern -> (SKU family, vCPUs, GiB) as functions of the number in the name
    (re.compile(r"n1-standard-(\d+)"), "N1 Predefined Instance", lambda n: (n, 3.75 * n)),
    (re.compile(r"a2-highgpu-(\d+)g"), "A2 Instance", lambda n: (12 * n, 85 * n)),
    (re.compile(r"a2-megagpu-16g"), "A2 Instance", lambda n: (96, 1360)),
    (re.compile(r"a3-highgpu-(\d+)g"), "A3 Instance", lambda n: (26 * n, 234 * n)),
    (re.compile(r"g2-standard-(\d+)"), "G2 Instance", lambda n: (n, 4 * n)),
)
_CACHE_S = 3600.0


@dataclass(frozen=True)
class Sku:
    """One price of the Billing Catalog: description, usage type, regions, $ per unit (hour or GiB-hour)."""

    description: str
    usage_type: str  # OnDemand, Preemptible, Commit1Yr, ...
    regions: tuple[str, ...]
    usd_per_unit: float


@dataclass(frozen=True)
class VmPrices:
    on_demand_usd_per_h: float | None
    spot_usd_per_h: float | None
    source: str  # which prices these are, as the controller reports them


def shape(machine_type: str) -> tuple[str, float, float] | None:
    """(SKU family, vCPUs, GiB) of a machine type spotfit prices; None for others.

    >>> shape("a2-highgpu-2g")
    ('A2 Instance', 24, 170)
    """
    for pattern, family, size in _SHAPES:
        match = pattern.fullmatch(machine_type)
        if match:
            n = int(match.group(1)) if match.groups() else 16
            vcpus, gib = size(n)
            return family, vcpus, gib
    return None


def price_from_skus(skus: list[Sku], machine_type: str, accelerator: str, gpus: int, region: str,
                    spot: bool) -> float | None:
    """$/h of the machine with its GPUs in `region` from `skus` (pure); None when a part has no price."""
    found = shape(machine_type)
    if found is None:
        return None
    family, vcpus, gib = found
    usage = "Preemptible" if spot else "OnDemand"
    parts = [(f"{family} Core", vcpus), (f"{family} Ram", gib)]
    if accelerator.upper() in GPU_SKUS and gpus:
        parts.append((GPU_SKUS[accelerator.upper()], gpus))
    total = 0.0
    for name, amount in parts:
        price = _part(skus, name, usage, region)
        if price is None:
            return None
        total += price * amount
    return total


def _part(skus: list[Sku], name: str, usage: str, region: str) -> float | None:
    prices = [s.usd_per_unit for s in skus if s.usage_type == usage and region in s.regions
              and _bare(s.description).startswith(f"{name} running in")]
    return min(prices) if prices else None


def _bare(description: str) -> str:
    return re.sub(r"^(Spot Preemptible|Preemptible)\s+", "", description.strip())


def bundled_prices(machine: Machine, accelerator: str, count: int, region: str) -> VmPrices:
    """The bundled catalog's prices of the machine in `region` (see the module doc)."""
    from spotfit.market.catalog import load_catalog

    name = accelerator.upper()
    if name in ATTACHED:
        rows = [o for o in load_catalog(accelerator=name, count=count, cloud="gcp", region=region)
                if not o.vm_included]
        od = min((o.on_demand_usd_per_h for o in rows if o.on_demand_usd_per_h is not None), default=None)
        spot = min((o.spot_usd_per_h for o in rows if o.spot_usd_per_h is not None), default=None)
        return VmPrices(od, spot, f"the bundled catalog ({count} × {name} only: the {machine.machine_type} host is "
                                  "not in it)")
    rows = [o for o in load_catalog(cloud="gcp", region=region) if o.instance_type == machine.machine_type]
    od = min((o.on_demand_usd_per_h for o in rows if o.on_demand_usd_per_h is not None), default=None)
    spot = min((o.spot_usd_per_h for o in rows if o.spot_usd_per_h is not None), default=None)
    return VmPrices(od, spot, "the bundled catalog")


class BillingCatalog:
    """The Compute Engine SKUs of the Cloud Billing Catalog API, read once an hour (thread-safe)."""

    def __init__(self, endpoint: str | None = None, credentials: Credentials | None = None):
        self.endpoint = endpoint or os.environ.get(BILLING_ENDPOINT_ENV) or None
        self.credentials = credentials
        self._skus: list[Sku] | None = None
        self._read_at = -float("inf")
        self._lock = threading.Lock()

    def skus(self) -> list[Sku]:
        with self._lock:
            if self._skus is None or time.monotonic() - self._read_at > _CACHE_S:
                self._skus, self._read_at = self._read(), time.monotonic()
            return self._skus

    def _read(self) -> list[Sku]:
        from google.cloud import billing_v1

        credentials = self.credentials
        if self.endpoint and credentials is None:
            from spotfit.backends.gcp.client import anonymous_credentials

            credentials = anonymous_credentials()
        client = billing_v1.CloudCatalogClient(
            transport="rest", credentials=credentials,
            client_options={"api_endpoint": self.endpoint} if self.endpoint else None)
        out = []
        for sku in client.list_skus(parent=COMPUTE_SERVICE):
            rates = sku.pricing_info[0].pricing_expression.tiered_rates if sku.pricing_info else []
            if not rates:
                continue
            price = rates[-1].unit_price  # the last tier: the rate of any use beyond free tiers
            out.append(Sku(sku.description, sku.category.usage_type, tuple(sku.service_regions),
                           int(price.units) + price.nanos / 1e9))
        return out


def live_prices(catalog: BillingCatalog, machine: Machine, accelerator: str, count: int, region: str) -> VmPrices:
    """The Billing Catalog's prices, or the bundled catalog's when it cannot be read or lacks a part."""
    from spotfit.backends.gcp.client import sdk_failure

    gpus = machine.accelerator_count or (count if accelerator.upper() in GPU_SKUS else 0)
    try:
        skus = catalog.skus()
    except Exception as exc:
        reason = sdk_failure(exc)
        if reason is None:
            raise
        fallback = bundled_prices(machine, accelerator, count, region)
        return VmPrices(fallback.on_demand_usd_per_h, fallback.spot_usd_per_h,
                        f"{fallback.source}; the Cloud Billing Catalog could not be read ({reason[:120]})")
    od = price_from_skus(skus, machine.machine_type, accelerator, gpus, region, spot=False)
    spot = price_from_skus(skus, machine.machine_type, accelerator, gpus, region, spot=True)
    if od is None or spot is None:
        fallback = bundled_prices(machine, accelerator, count, region)
        return VmPrices(fallback.on_demand_usd_per_h, fallback.spot_usd_per_h,
                        f"{fallback.source}; the Cloud Billing Catalog has no price for {machine.machine_type} "
                        f"in {region}")
    return VmPrices(od, spot, "the Cloud Billing Catalog (Compute Engine SKUs)")
