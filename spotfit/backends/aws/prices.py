"""Live spot prices: `describe_spot_price_history` turned into a market trace for the planner.

`refresh_market` reads an instance type's spot price history in a region and writes it in the
trace format (`tick,timestamp,zone,available,spot_price_usd_per_h,on_demand_usd_per_h`), so
that `spotfit plan --trace FILE` and `market.trace: FILE` use today's prices. Each tick takes
the latest price published at or before it. AWS publishes prices, not capacity: a zone counts
as available from its first published price on, and real interruptions only show up through
the notices the runtime receives. The on-demand price comes from the bundled catalog unless
given.

Example:

>>> from datetime import datetime, timedelta
>>> t0 = datetime(2026, 1, 1)
>>> points = [PricePoint("us-east-1a", t0, 0.9), PricePoint("us-east-1a", t0 + timedelta(minutes=7), 1.1)]
>>> [r["spot_price_usd_per_h"] for r in market_rows(points, 3.06, t0, t0 + timedelta(minutes=15), 300)]
[0.9, 0.9, 1.1]
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from spotfit.errors import UsageError
from spotfit.market.trace import COLUMNS

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Ec2Client
    from spotfit.market.live import LiveMarket


@dataclass(frozen=True)
class PricePoint:
    zone: str
    timestamp: datetime  # naive UTC
    spot_usd_per_h: float


class TraceRow(TypedDict):
    """One row of a trace file (`COLUMNS`): one zone at one tick."""

    tick: int
    timestamp: str  # naive UTC, %Y-%m-%d %H:%M:%S
    zone: str
    available: int  # 1 or 0
    spot_price_usd_per_h: float
    on_demand_usd_per_h: float


def spot_price_history(ec2: Ec2Client, instance_type: str, start: datetime, end: datetime,
                       product: str = "Linux/UNIX") -> list[PricePoint]:
    """Every published spot price of `instance_type` in `ec2`'s region between `start` and `end`."""
    pages = ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=[instance_type], ProductDescriptions=[product, f"{product} (Amazon VPC)"],
        StartTime=start, EndTime=end)
    points: list[PricePoint] = []
    for page in pages:
        for rec in page["SpotPriceHistory"]:
            stamp = rec["Timestamp"]
            if stamp.tzinfo is not None:
                stamp = stamp.astimezone(UTC).replace(tzinfo=None)
            points.append(PricePoint(rec["AvailabilityZone"], stamp, float(rec["SpotPrice"])))
    return sorted(points, key=lambda p: (p.zone, p.timestamp))


def market_rows(points: list[PricePoint], on_demand_usd_per_h: float, start: datetime, end: datetime,
                gap_s: int) -> list[TraceRow]:
    """Trace rows, one per zone per tick from `start` to `end` (pure)."""
    zones = sorted({p.zone for p in points})
    n_ticks = max(1, int((end - start).total_seconds() // gap_s))
    rows: list[TraceRow] = []
    for tick in range(n_ticks):
        at = start + timedelta(seconds=tick * gap_s)
        for zone in zones:
            # The latest price at or before the tick; before the first one, the first one.
            seen = [p for p in points if p.zone == zone and p.timestamp <= at]
            first = next(p for p in points if p.zone == zone)
            price = (seen[-1] if seen else first).spot_usd_per_h
            rows.append({"tick": tick, "timestamp": at.strftime("%Y-%m-%d %H:%M:%S"), "zone": zone,
                         "available": 1 if seen else 0, "spot_price_usd_per_h": price,
                         "on_demand_usd_per_h": on_demand_usd_per_h})
    return rows


def on_demand_price(instance_type: str, region: str) -> float:
    from spotfit.market.catalog import load_catalog

    prices = [o.on_demand_usd_per_h for o in load_catalog(cloud="aws", region=region)
              if o.instance_type == instance_type and o.on_demand_usd_per_h is not None]
    if not prices:
        raise UsageError(f"No on-demand price for {instance_type} in {region} in the bundled catalog.",
                         hint="Pass the on-demand price explicitly (on_demand_usd_per_h=...).")
    return min(prices)


def refresh_market(ec2: Ec2Client, instance_type: str, path: str | Path, hours: float = 24.0, gap_s: int = 300,
                   now: datetime | None = None, on_demand_usd_per_h: float | None = None) -> Path:
    """Write the last `hours` of `instance_type`'s spot prices as a trace CSV at `path`."""
    end = now or datetime.now(UTC).replace(tzinfo=None)
    start = end - timedelta(hours=hours)
    points = spot_price_history(ec2, instance_type, start, end)
    if not points:
        raise UsageError(f"No spot price history for {instance_type} in {ec2.meta.region_name}.",
                         hint="Check the instance type is offered as spot in that region.")
    od = on_demand_usd_per_h if on_demand_usd_per_h is not None else on_demand_price(
        instance_type, ec2.meta.region_name)
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(market_rows(points, od, start, end, gap_s))
    return path


def live_market(ec2: Ec2Client, instance_type: str, zones: list[str], gap_s: int = 300) -> LiveMarket | None:
    """A `LiveMarket` of `instance_type` in `ec2`'s region, or None when it has no on-demand price.

    Prices are fetched through `ec2` as the market needs them; a fetch the SDK cannot make (no
    credentials, no endpoint) keeps the prices already known.
    """
    from spotfit.backends.aws.client import sdk_failure
    from spotfit.market.live import LiveMarket

    try:
        od = on_demand_price(instance_type, ec2.meta.region_name)
    except UsageError:
        return None

    def fetch(start_s: float, end_s: float) -> list[tuple[str, float, float]] | None:
        start = datetime.fromtimestamp(start_s, UTC).replace(tzinfo=None)
        end = datetime.fromtimestamp(end_s, UTC).replace(tzinfo=None)
        try:
            points = spot_price_history(ec2, instance_type, start, end)
        except Exception as exc:
            if sdk_failure(exc) is None:
                raise
            return None
        return [(p.zone, p.timestamp.replace(tzinfo=UTC).timestamp(), p.spot_usd_per_h) for p in points]

    return LiveMarket(zones, gap_s, od, fetch)
