"""What a policy may see of the market: every zone's history up to now, never beyond.

A `MarketView` wraps per-zone arrays (zones × ticks) and a cursor `tick`: every accessor
answers for the cursor or for ticks before it. Replays move the cursor over a whole trace
(`MarketView.of_trace`); a live controller builds a view from what it has observed so far
(`MarketView.observed`). Run statistics (current run length, mean up and down time so far) are
prefix sums computed once, so each lookup is O(1) and uses only the past.

Example:

>>> import numpy as np
>>> view = MarketView.observed(["z1"], gap_s=60, available=[[1, 1, 0, 1]],
...                            spot_usd_per_h=[[1.0] * 4], on_demand_usd_per_h=[[3.0] * 4])
>>> view.is_available("z1"), view.run_ticks("z1"), view.mean_up_ticks("z1")
(True, 1, 2.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from spotfit.market.trace import Trace


class MarketView:
    """Causal view over per-zone availability and prices; `tick` is "now"."""

    __slots__ = ("zones", "gap_s", "tick", "_index", "_avail", "_spot", "_od", "_cum_up",
                 "_run_start", "_falls", "_rises", "_n", "_runs")

    def __init__(self, zones: Sequence[str], gap_s: int, available: np.ndarray,
                 spot_usd_per_h: np.ndarray, on_demand_usd_per_h: np.ndarray, tick: int = 0):
        self.zones = tuple(zones)
        self.gap_s = int(gap_s)
        self.tick = int(tick)
        self._index = {z: i for i, z in enumerate(self.zones)}
        self._avail = np.asarray(available, dtype=bool)
        self._spot = np.asarray(spot_usd_per_h, dtype=float)
        self._od = np.asarray(on_demand_usd_per_h, dtype=float)
        self._n: int = self._avail.shape[1]
        a = self._avail
        self._cum_up = np.cumsum(a, axis=1)
        change = np.zeros_like(a)
        change[:, 1:] = a[:, 1:] != a[:, :-1]
        idx = np.where(change, np.arange(self._n)[None, :], 0)
        self._run_start = np.maximum.accumulate(idx, axis=1)
        falls = np.zeros_like(a)
        falls[:, 1:] = a[:, :-1] & ~a[:, 1:]
        rises = np.zeros_like(a)
        rises[:, 1:] = ~a[:, :-1] & a[:, 1:]
        self._falls = np.cumsum(falls, axis=1)
        self._rises = np.cumsum(rises, axis=1)
        self._runs: dict[int, tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {}

    @classmethod
    def of_trace(cls, trace: Trace, tick: int = 0) -> MarketView:
        """A replay view over a `Trace`; move `view.tick` forward as time passes."""
        return cls(trace.zones, trace.gap_s, trace.available, trace.spot_usd_per_h,
                   trace.on_demand_usd_per_h, tick)

    @classmethod
    def observed(cls, zones: Sequence[str], gap_s: int, available: Any, spot_usd_per_h: Any,
                 on_demand_usd_per_h: Any) -> MarketView:
        """A live view: the arrays hold every observation so far, the last one is now."""
        view = cls(zones, gap_s, np.atleast_2d(available), np.atleast_2d(spot_usd_per_h),
                   np.atleast_2d(on_demand_usd_per_h))
        view.tick = view._n - 1
        return view

    def _t(self) -> int:
        # Past the end of the recorded history spot counts as unavailable at the last prices.
        return min(self.tick, self._n - 1)

    def is_available(self, zone: str) -> bool:
        """Whether spot can be had in `zone` now."""
        return self.tick < self._n and bool(self._avail[self._index[zone], self.tick])

    def spot_usd_per_h(self, zone: str) -> float:
        """The spot price in `zone` now."""
        return float(self._spot[self._index[zone], self._t()])

    def on_demand_usd_per_h(self, zones: Sequence[str] | None = None) -> float:
        """The cheapest on-demand price now among `zones` (all zones by default)."""
        t = self._t()
        rows = [self._index[z] for z in zones] if zones else slice(None)
        return float(np.min(self._od[rows, t]))

    def history(self, zone: str) -> np.ndarray:
        """Availability of `zone` from the start of the history up to and including now."""
        return self._avail[self._index[zone], : self._t() + 1]

    def run_ticks(self, zone: str) -> int:
        """How many ticks the current state (up or down) of `zone` has lasted, now included."""
        i, t = self._index[zone], self._t()
        return t - int(self._run_start[i, t]) + 1

    def availability(self, zone: str) -> float:
        """Fraction of ticks so far in which spot was available in `zone`."""
        i, t = self._index[zone], self._t()
        return float(self._cum_up[i, t]) / (t + 1)

    def mean_up_ticks(self, zone: str) -> float | None:
        """Mean length of the up runs of `zone` that ended before now (None if none did)."""
        i, t = self._index[zone], self._t()
        n = int(self._falls[i, t])
        if n == 0:
            return None
        current = self.run_ticks(zone) if self._avail[i, t] else 0
        return (float(self._cum_up[i, t]) - current) / n

    def mean_down_ticks(self, zone: str) -> float | None:
        """Mean length of the down runs of `zone` that ended before now (None if none did)."""
        i, t = self._index[zone], self._t()
        n = int(self._rises[i, t])
        if n == 0:
            return None
        current = 0 if self._avail[i, t] else self.run_ticks(zone)
        return (t + 1 - float(self._cum_up[i, t]) - current) / n

    def up_runs(self, zone: str) -> np.ndarray:
        """Lengths (ticks) of the up runs of `zone` that ended before now, oldest first."""
        return self._completed(zone, True)

    def down_runs(self, zone: str) -> np.ndarray:
        """Lengths (ticks) of the down runs of `zone` that ended before now, oldest first."""
        return self._completed(zone, False)

    def _completed(self, zone: str, up: bool) -> np.ndarray:
        i = self._index[zone]
        if i not in self._runs:
            a = self._avail[i]
            starts = np.concatenate(([0], np.flatnonzero(a[1:] != a[:-1]) + 1))
            ends = np.concatenate((starts[1:], [self._n]))  # the tick a run is known to be over
            lengths = ends - starts
            state = a[starts]
            self._runs[i] = ((lengths[state], ends[state]), (lengths[~state], ends[~state]))
        lengths, ends = self._runs[i][0 if up else 1]
        return lengths[: int(np.searchsorted(ends, self._t(), side="right"))]
