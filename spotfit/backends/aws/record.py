"""`spotfit market record`: append an instance type's live market to a trace file.

Each call appends the ticks since the file's last one (or the last `hours`, for a new file) in
the trace format every trace reader takes (`tick,timestamp,zone,available,spot_price_usd_per_h,
on_demand_usd_per_h`): the spot price in force at each tick (`DescribeSpotPriceHistory`), the
catalog's on-demand price, and `available` = 0 at the ticks where a spotfit attempt on this
machine saw that zone's capacity go (a preemption, or a launch refused for lack of capacity;
AWS publishes prices, not capacity). Run it from cron to build a history that `spotfit plan
--trace` and `spotfit simulate --trace` read.

Example (pure):

>>> rows = [{"tick": 0, "timestamp": "2026-01-01 00:00:00", "zone": "z", "available": 1},
...         {"tick": 1, "timestamp": "2026-01-01 00:05:00", "zone": "z", "available": 1}]
>>> at = datetime(2026, 1, 1, 0, 6, tzinfo=UTC).timestamp()
>>> [r["available"] for r in mark_outages(rows, [("z", at, "preempted")], gap_s=300)]
[1, 0]
"""

from __future__ import annotations

import csv
import gzip
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from spotfit.backends.aws.prices import market_rows, on_demand_price, spot_price_history
from spotfit.errors import UsageError
from spotfit.market.trace import COLUMNS
from spotfit.state.records import raw_spec_of

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Ec2Client
    from spotfit.backends.aws.prices import TraceRow
    from spotfit.backends.base import Report
    from spotfit.state.db import StateDB

_STAMP = "%Y-%m-%d %H:%M:%S"
LOOKBACK = timedelta(days=1)  # to find the price in force at the first new tick


def _open(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return cast(IO[str], gzip.open(path, mode + "t", newline="", encoding="utf-8"))
    return open(path, mode, newline="", encoding="utf-8")


def read_tail(path: Path) -> tuple[list[str], int, datetime] | None:
    """(zones, last tick, last timestamp) of an existing trace file; None when there is none."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    with _open(path, "r") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise UsageError(f"Cannot append to {path}: its header is {reader.fieldnames}, expected {list(COLUMNS)}.",
                             hint="Record into a new file (--trace NEW.csv).")
        zones: list[str] = []
        last: dict[str, str] = {}
        for row in reader:
            if row["zone"] not in zones:
                zones.append(row["zone"])
            last = row
    if not last:
        return None
    return zones, int(last["tick"]), datetime.strptime(last["timestamp"], _STAMP)


def mark_outages(rows: list[TraceRow], outages: list[tuple[str, float, str]], gap_s: int) -> list[TraceRow]:
    """`available` = 0 at each row whose tick holds an outage of its zone (epoch seconds)."""
    for row in rows:
        start = datetime.strptime(row["timestamp"], _STAMP).replace(tzinfo=UTC).timestamp()
        if any(z == row["zone"] and start <= at < start + gap_s for z, at, _ in outages):
            row["available"] = 0
    return rows


def record(ec2: Ec2Client, instance_type: str, path: str | Path, zones: list[str] | None,
           outages: list[tuple[str, float, str]], hours: float = 24.0, gap_s: int = 300,
           now: datetime | None = None) -> Report:
    """Append the ticks up to `now` to `path`; returns what was written."""
    path = Path(path)
    end = now or datetime.now(UTC).replace(tzinfo=None)
    tail = read_tail(path)
    if tail is None:
        first_tick, start = 0, end - timedelta(hours=hours)
    else:
        file_zones, last_tick, last_at = tail
        if zones and sorted(zones) != sorted(file_zones):
            raise UsageError(f"Invalid --zones: received {', '.join(zones)}, but {path} records "
                             f"{', '.join(file_zones)}; every zone of a trace covers the same ticks.",
                             hint=f"Pass --zones {','.join(file_zones)}, or record into a new file.")
        zones = file_zones
        first_tick, start = last_tick + 1, last_at + timedelta(seconds=gap_s)
    if end - start < timedelta(seconds=gap_s):
        return {"trace": str(path), "rows": 0, "zones": zones or [], "outages": 0}
    region = ec2.meta.region_name
    points = spot_price_history(ec2, instance_type, start - LOOKBACK, end)
    if zones:
        missing = sorted(set(zones) - {p.zone for p in points})
        if missing:
            raise UsageError(f"No spot price history for {instance_type} in {', '.join(missing)}.",
                             hint=f"Pass --zones of {region} where {instance_type} is offered as spot.")
        points = [p for p in points if p.zone in zones]
    if not points:
        raise UsageError(f"No spot price history for {instance_type} in {region}.",
                         hint="Check that the instance type is offered as spot in that region.")
    rows = market_rows(points, on_demand_price(instance_type, region), start, end, gap_s)
    for row in rows:
        row["tick"] += first_tick
        row["available"] = 1  # a published price: AWS publishes no capacity, outages come from attempts
    outages = [o for o in outages if o[0] in {r["zone"] for r in rows}]
    rows = mark_outages(rows, outages, gap_s)
    with _open(path, "a") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        if tail is None:
            writer.writeheader()
        writer.writerows(rows)
    return {"trace": str(path), "rows": len(rows), "zones": sorted({r["zone"] for r in rows}),
            "outages": sum(1 for r in rows if not r["available"])}


def observed_outages(db: StateDB, region: str, instance_type: str) -> list[tuple[str, float, str]]:
    """(zone, epoch s, kind) of the preemptions and capacity errors of this machine's aws attempts."""

    from spotfit.backends.aws.regions import instance_type_for, region_of

    out: list[tuple[str, float, str]] = []
    for job in db.list_jobs(limit=1_000_000):
        spec = raw_spec_of(job)
        if spec.get("backend") != "aws":
            continue
        aws, res = spec.get("aws") or {}, spec.get("resources") or {}
        try:
            kind = aws.get("instance_type") or instance_type_for(res.get("accelerator", "V100"), res.get("count", 1),
                                                                 region)
        except UsageError:
            continue
        if kind != instance_type:
            continue
        for a in db.attempts(job["id"]):
            if a["state"] in ("preempted", "no_capacity") and region_of(a["zone"]) == region and a["ended_at"]:
                zone = cast(str, a["zone"])  # not None: its region is `region`
                out.append((zone, float(a["ended_at"]), a["state"]))
    return out
