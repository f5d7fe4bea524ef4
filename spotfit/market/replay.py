"""The replayed spot market of the local backend: a trace played back over scaled wall time.

Trace time runs `time_scale` times faster than wall time from the job's start (the spec's
`market.start`, or the trace's first tick). At any wall moment the replay says which tick it
is, whether spot is available in a zone, and its price; `cost_usd` integrates the price of a
zone (or on-demand) over a span of trace time, billed as clouds bill Linux instances: per
second, with a 60-second minimum per launch.

Example:

>>> from spotfit.market.trace import load_trace, resolve_trace
>>> replay = MarketReplay(load_trace(resolve_trace("aws-v100")), ["us-west-2a"], 600.0)
>>> replay.tick_at(replay.origin_s + 195 * 2)
2
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import numpy as np

from spotfit.errors import UsageError
from spotfit.market.trace import Trace
from spotfit.market.view import MarketView

MIN_BILLED_S = 60.0


class MarketReplay:
    """Trace time and prices for a job; `origin_s` is the trace second at which the job starts."""

    def __init__(self, trace: Trace, zones: list[str], time_scale: float,
                 start: datetime | None = None):
        self.trace = trace.select(zones or None)
        self.zones = list(self.trace.zones)
        self.time_scale = time_scale
        self.gap_s = self.trace.gap_s
        first = _epoch_s(self.trace.start)
        if start is None:
            self.origin_s = first
        else:
            self.origin_s = _epoch_s(start)
            last = first + self.gap_s * (self.trace.n_ticks - 1)
            if not first <= self.origin_s <= last:
                raise UsageError(
                    f"Invalid `market.start`: received {start.isoformat()}, expected a time inside "
                    f"the trace ({self.trace.start.isoformat()} .. {datetime.fromtimestamp(last, UTC).isoformat()}).",
                    hint="Pick a start inside the trace, or leave `market.start` out to start at its beginning.",
                )
        self._first_s = first
        self._cum_price = np.concatenate(
            [np.zeros((len(self.zones), 1)), np.cumsum(self.trace.spot_usd_per_h, axis=1)], axis=1
        )

    def tick_at(self, trace_s: float) -> int:
        """The trace tick that contains the absolute trace second `trace_s`."""
        tick = int((trace_s - self._first_s) // self.gap_s)
        return min(max(tick, 0), self.trace.n_ticks - 1)

    def available(self, zone: str, trace_s: float) -> bool:
        return bool(self.trace.available[self.trace.zone_index(zone), self.tick_at(trace_s)])

    def view(self, trace_s: float) -> MarketView:
        """What a policy may see at `trace_s`: the past and the present, never the future."""
        return MarketView.of_trace(self.trace, self.tick_at(trace_s))

    def on_demand_usd_per_h(self) -> float:
        return float(np.max(self.trace.on_demand_usd_per_h))

    def cost_usd(self, market: str, zone: str | None, start_s: float, end_s: float) -> tuple[float, float]:
        """(billed seconds, cost) of one launch from `start_s` to `end_s` (absolute trace seconds)."""
        billed = max(end_s - start_s, MIN_BILLED_S)
        end_s = start_s + billed
        if market != "spot":
            return billed, billed / 3600.0 * self.on_demand_usd_per_h()
        if zone is None:
            raise ValueError("a spot launch has a zone")
        z = self.trace.zone_index(zone)
        return billed, self._spot_integral(z, start_s, end_s)

    def _spot_integral(self, z: int, start_s: float, end_s: float) -> float:
        """∫ price dt over [start_s, end_s), per tick prices, in USD."""
        def cum(t: float) -> float:
            rel = (t - self._first_s) / self.gap_s
            tick = int(np.floor(rel))
            if tick < 0:
                return cast(float, rel * self.trace.spot_usd_per_h[z, 0])
            if tick >= self.trace.n_ticks:
                last = self.trace.n_ticks - 1
                return cast(float, self._cum_price[z, last + 1] + (rel - last - 1) * self.trace.spot_usd_per_h[z, last])
            return cast(float, self._cum_price[z, tick] + (rel - tick) * self.trace.spot_usd_per_h[z, tick])

        return (cum(end_s) - cum(start_s)) * self.gap_s / 3600.0


def _epoch_s(moment: datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
