"""What a launch costs, recomputed straight from the trace CSV, apart from spotfit's code.

The model of docs/market.md, which the replay bills by: time is slotted in ticks of the
trace's gap (195 s for the bundled trace) from its first timestamp; spot costs the price of
each tick it overlaps, on-demand a flat price; billing is per second with a 60 s minimum per
launch. The CSV is read with the csv module, not with `spotfit.market.trace`.
"""

from __future__ import annotations

import csv
import functools
import gzip
from dataclasses import dataclass
from datetime import UTC, datetime

from spotfit.market.trace import resolve_trace

GAP_S = 195.0  # the bundled trace's tick
MIN_BILLED_S = 60.0


@dataclass(frozen=True)
class Tick:
    number: int
    start_s: float  # epoch seconds of trace time
    available: bool
    spot_usd_per_h: float
    on_demand_usd_per_h: float


@functools.lru_cache(maxsize=16)
def ticks(zone: str, trace: str = "aws-v100") -> tuple[Tick, ...]:
    """Every tick of `zone` in the trace CSV, in order."""
    out, first = [], None
    with gzip.open(resolve_trace(trace), "rt") as f:
        for row in csv.DictReader(f):
            if first is None:
                first = datetime.fromisoformat(row["timestamp"]).replace(tzinfo=UTC).timestamp()
            if row["zone"] == zone:
                n = int(row["tick"])
                out.append(Tick(n, first + n * GAP_S, float(row["available"]) >= 1,
                                float(row["spot_price_usd_per_h"]), float(row["on_demand_usd_per_h"])))
    return tuple(out)


def launch_cost_usd(market: str, zone: str, start_s: float, end_s: float) -> float:
    """The cost of one launch from `start_s` to `end_s` (epoch seconds of trace time).

    `zone`: where spot ran; for an on-demand launch, the job's zone (its on-demand price).
    """
    rows = ticks(zone)
    billed = max(end_s - start_s, MIN_BILLED_S)
    if market != "spot":
        return billed / 3600.0 * rows[0].on_demand_usd_per_h
    end, cost = start_s + billed, 0.0
    for i, tick in enumerate(rows):
        tick_end = rows[i + 1].start_s if i + 1 < len(rows) else tick.start_s + GAP_S
        overlap = min(end, tick_end) - max(start_s, tick.start_s)
        if overlap > 0:
            cost += overlap / 3600.0 * tick.spot_usd_per_h
    return cost


def down_ticks(zone: str, start_s: float, end_s: float) -> list[int]:
    """Numbers of the ticks overlapping [start_s, end_s] in which `zone` had no spot."""
    return [t.number for t in ticks(zone) if not t.available and t.start_s <= end_s and t.start_s + GAP_S > start_s]


def tick_at(zone: str, trace_s: float) -> int:
    """Number of the tick of `zone` that contains the trace second `trace_s`."""
    return next(t.number for t in ticks(zone) if t.start_s <= trace_s < t.start_s + GAP_S)
