"""Tiny hand-made traces for the market tests."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from spotfit.market.trace import Trace


def make_trace(available, spot=1.0, on_demand=3.0, gap_s=60, zones=None) -> Trace:
    """A Trace from a zones × ticks 0/1 list; prices scalar or zones × ticks."""
    avail = np.atleast_2d(np.asarray(available, dtype=bool))
    shape = avail.shape
    return Trace(
        zones=tuple(zones or [f"z{i}" for i in range(shape[0])]),
        gap_s=gap_s,
        start=datetime(2023, 1, 1),
        available=avail,
        spot_usd_per_h=np.broadcast_to(np.asarray(spot, dtype=float), shape).copy(),
        on_demand_usd_per_h=np.broadcast_to(np.asarray(on_demand, dtype=float), shape).copy(),
    )


def write_csv(path: Path, trace: Trace) -> Path:
    """Write `trace` in the shared CSV format."""
    lines = ["tick,timestamp,zone,available,spot_price_usd_per_h,on_demand_usd_per_h"]
    for i, zone in enumerate(trace.zones):
        for t in range(trace.n_ticks):
            stamp = trace.start + timedelta(seconds=t * trace.gap_s)
            lines.append(f"{t},{stamp:%Y-%m-%d %H:%M:%S},{zone},{int(trace.available[i, t])},"
                         f"{trace.spot_usd_per_h[i, t]},{trace.on_demand_usd_per_h[i, t]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def with_future_flipped(trace: Trace, from_tick: int) -> Trace:
    """`trace` with every zone's availability inverted from `from_tick` on: a policy that uses
    only the past decides the same up to that tick on both."""
    available = trace.available.copy()
    available[:, from_tick:] = ~available[:, from_tick:]
    return type(trace)(trace.zones, trace.gap_s, trace.start, available, trace.spot_usd_per_h,
                       trace.on_demand_usd_per_h)
