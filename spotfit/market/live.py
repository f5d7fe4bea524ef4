"""A live spot market: published prices and observed availability, without a trace.

On a real cloud the controller has no replay. `LiveMarket` keeps what it can know instead:

- each zone's published spot prices (on AWS `DescribeSpotPriceHistory`, fetched through
  `fetch(start, end)` at most every `refresh_s`), and the catalog's on-demand price;
- what it observed itself: a preemption of an attempt, a launch refused for lack of capacity.

From these it bills an attempt as the cloud does (per second at the price in force, 60-second
minimum per launch) and builds the `MarketView` a policy decides on: one tick every `gap_s`
from the first price on, a zone available at a tick unless a preemption or capacity error was
observed in it (the cloud publishes prices, not capacity). Times are epoch seconds.

Example:

>>> m = LiveMarket(["z1", "z2"], gap_s=60, on_demand_usd_per_h=3.0, fetch=lambda a, b: [
...     ("z1", 0.0, 1.0), ("z1", 120.0, 2.0), ("z2", 0.0, 0.5)], now=lambda: 300.0)
>>> m.spot_usd_per_h("z1", 100.0), m.spot_usd_per_h("z1", 200.0)
(1.0, 2.0)
>>> m.cost_usd("spot", "z1", 60.0, 180.0)  # 60 s at $1/h, then 60 s at $2/h
(120.0, 0.05)
>>> m.cost_usd("on_demand", None, 0.0, 10.0)  # a 60-second minimum
(60.0, 0.05)
>>> m.observe("z2", "preempted", 290.0)  # in the tick of 300 s: spot is gone there now
>>> view = m.view(300.0)
>>> view.is_available("z1"), view.is_available("z2"), view.spot_usd_per_h("z2")
(True, False, 0.5)
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

from spotfit.market.replay import MIN_BILLED_S
from spotfit.market.view import MarketView

Fetch = Callable[[float, float], list[tuple[str, float, float]] | None]  # (zone, epoch s, $/h) points


class LiveMarket:
    """Published prices and observed outages of `zones`; see the module doc."""

    def __init__(self, zones: Sequence[str], gap_s: int, on_demand_usd_per_h: float, fetch: Fetch,
                 history_s: float = 86400.0, refresh_s: float = 300.0, now: Callable[[], float] = time.time,
                 source: str | None = None):
        self.gap_s = int(gap_s)
        self.source = source  # where the prices come from, as the controller reports it (None: the default)
        self.on_demand_usd_per_h = float(on_demand_usd_per_h)
        self.refresh_s = refresh_s
        self._fetch = fetch
        self._now = now
        self._prices: dict[str, list[tuple[float, float]]] = {z: [] for z in zones}
        self._any_zone = not zones  # no zones named: every zone with a price
        self._outages: list[tuple[str, float, str]] = []
        self._fetched_until: float | None = None
        self._fetched_at = -float("inf")
        self.refresh(history_s)

    @property
    def zones(self) -> list[str]:
        """The zones with a published price (the ones a policy can choose)."""
        return [z for z, points in self._prices.items() if points]

    def refresh(self, history_s: float = 0.0) -> None:
        """Fetch the prices published since the last fetch (at most every `refresh_s`)."""
        now = self._now()
        if now - self._fetched_at < self.refresh_s:
            return
        start = self._fetched_until if self._fetched_until is not None else now - history_s
        points = self._fetch(start, now)
        self._fetched_at = now
        if points is None:  # the cloud could not be asked: keep what is known
            return
        self._fetched_until = now
        for zone, at, price in points:
            if zone in self._prices or self._any_zone:
                series = self._prices.setdefault(zone, [])
                if (at, price) not in series:
                    bisect.insort(series, (at, price))

    def observe(self, zone: str | None, kind: str, at: float) -> None:
        """A preemption or a capacity error seen in `zone` at epoch second `at`."""
        if zone is not None:
            self._outages.append((zone, at, kind))

    def outages(self) -> list[tuple[str, float, str]]:
        """(zone, epoch s, kind) of every observation, oldest first."""
        return sorted(self._outages, key=lambda o: o[1])

    def spot_usd_per_h(self, zone: str, at: float | None = None) -> float | None:
        """The price in force in `zone` at `at` (before the first one: the first); None if none is known."""
        self.refresh()
        series = self._prices.get(zone) or []
        if not series:
            return None
        at = self._now() if at is None else at
        i = bisect.bisect_right(series, (at, float("inf"))) - 1
        return series[max(i, 0)][1]

    def cost_usd(self, market: str, zone: str | None, start: float, end: float) -> tuple[float, float]:
        """(billed seconds, USD) of one launch from `start` to `end`: per second, 60 s minimum."""
        billed = max(end - start, MIN_BILLED_S)
        end = start + billed
        if market != "spot" or zone is None or not self._prices.get(zone):
            return billed, billed / 3600.0 * self.on_demand_usd_per_h
        series = self._prices[zone]
        cuts = [start] + [at for at, _ in series if start < at < end] + [end]
        usd = sum((b - a) / 3600.0 * (self.spot_usd_per_h(zone, a) or 0.0) for a, b in pairwise(cuts))
        return billed, round(usd, 9)

    def view(self, at: float) -> MarketView:
        """What a policy may see at epoch second `at`: one every `gap_s` back from `at` to the first price."""
        self.refresh()
        zones = self.zones
        firsts = [self._prices[z][0][0] for z in zones]
        # The tick grid ends at `at`: an outage seen less than `gap_s` ago downs the zone now.
        n = max(1, int((at - min([*firsts, at])) // self.gap_s) + 1)
        ticks = at - self.gap_s * np.arange(n)[::-1]
        spot = np.array([[self.spot_usd_per_h(z, t) or 0.0 for t in ticks] for z in zones]).reshape(len(zones), n)
        available = np.ones((len(zones), n), dtype=bool)
        for zone, when, _ in self._outages:
            ago = int((at - when) // self.gap_s)
            if zone in zones and 0 <= ago < n:
                available[zones.index(zone), n - 1 - ago] = False
        od = np.full((len(zones), n), self.on_demand_usd_per_h)
        return MarketView.observed(zones, self.gap_s, available, spot, od)
