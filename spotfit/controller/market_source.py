"""Where a job's prices, capacity and bills come from: a replayed trace, a live cloud, or nothing.

`AttemptPlanner` holds one `MarketSource` and asks it, whatever the mode:

- `Replay`: the job's market trace, replayed (`market.trace`); trace time runs on the
  `TraceClock` and the policy is asked at each tick start (`ticks.PolicyTicker`);
- `Live`: without a trace, on a backend that publishes prices (aws): the policy decides each
  launch on the prices and the outages seen so far; it does not switch a running attempt;
- `NoMarket`: neither: launches follow the spec (spot in the first zone not just refused, or
  on-demand), and attempts are billed nothing.

Trace seconds of the last two are wall seconds since the job started (`epoch` maps them back).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

from spotfit.market.live import LiveMarket
from spotfit.market.replay import MarketReplay
from spotfit.market.trace import zone_stats
from spotfit.market.view import MarketView
from spotfit.state.records import AttemptRecord, trace_start_s
from spotfit.state.states import Market

NO_CAPACITY_RETRY_S = 300.0  # without a market: how long a zone that had no capacity is skipped
MAX_BUDGET_SEARCH_S = 1e10  # trace seconds (three centuries): a budget not spent by then never is


class MarketSource(Protocol):
    """What the planner asks of the market, in trace seconds."""

    replayed: bool  # trace time is the replay's modeled clock (else the wall since the job started)

    def time_scale(self) -> float: ...
    def on_demand_usd_per_h(self) -> float | None: ...
    def zones(self) -> list[str]: ...
    def spot_available(self, zone: str, at_s: float) -> bool: ...
    def spot_price(self, zone: str | None, at_s: float) -> float | None: ...
    def bill(self, attempt: AttemptRecord, end_s: float) -> tuple[float, float]: ...
    def budget_reached_s(self, attempt: AttemptRecord, left_usd: float) -> float | None: ...
    def billed_overhead_s(self, attempt: AttemptRecord, end_s: float, overhead_s: float) -> float | None: ...
    def mtbf_wall_s(self, zone: str) -> float | None: ...
    def asks_policy(self) -> bool:
        """Whether the policy decides the launches (else the spec does: spot, zones in order, or on-demand)."""
    def policy_market(self, at_s: float, blocked: set[str | None]) -> tuple[int, tuple[str, ...], MarketView]:
        """(gap s, zones, view) the policy decides on at `at_s`; `blocked` zones are down in the view."""
    def blocked(self, no_capacity: dict[str | None, float], now_s: float) -> set[str | None]:
        """The zones a recent launch found without capacity (`no_capacity`: zone -> trace second)."""
    def observe(self, zone: str | None, kind: str) -> None:
        """A launch in `zone` found no capacity, or an attempt there was preempted (`kind`)."""
    def price_moves(self) -> bool:
        """Whether the spot price can fall back under a `price_cap` (a replay, a live price: not a fixed one)."""
    def price_source(self, attempt: AttemptRecord) -> str | None:
        """Where the attempt's price came from, for its ledger row (None: nothing priced it)."""


class NoMarket:
    """No trace and no published prices: nothing billed, zones retried after NO_CAPACITY_RETRY_S."""

    replayed = False

    def time_scale(self) -> float:
        return 1.0

    def on_demand_usd_per_h(self) -> float | None:
        return None

    def zones(self) -> list[str]:
        return []

    def spot_available(self, zone: str, at_s: float) -> bool:
        return True

    def spot_price(self, zone: str | None, at_s: float) -> float | None:
        return None

    def bill(self, attempt: AttemptRecord, end_s: float) -> tuple[float, float]:
        return max(end_s - (attempt["trace_start_s"] or 0.0), 0.0), 0.0

    def budget_reached_s(self, attempt: AttemptRecord, left_usd: float) -> float | None:
        return None

    def billed_overhead_s(self, attempt: AttemptRecord, end_s: float, overhead_s: float) -> float | None:
        return None

    def mtbf_wall_s(self, zone: str) -> float | None:
        return None

    def asks_policy(self) -> bool:
        return False

    def policy_market(self, at_s: float, blocked: set[str | None]) -> tuple[int, tuple[str, ...], MarketView]:
        raise RuntimeError("the policy is asked only when the job has a market")

    def blocked(self, no_capacity: dict[str | None, float], now_s: float) -> set[str | None]:
        return {z for z, t in no_capacity.items() if now_s - t < NO_CAPACITY_RETRY_S}

    def observe(self, zone: str | None, kind: str) -> None:
        pass

    def price_moves(self) -> bool:
        return False

    def price_source(self, attempt: AttemptRecord) -> str | None:
        return None


class Live(NoMarket):
    """The backend's published prices and the outages seen (`LiveMarket`), without a trace."""

    def __init__(self, live: LiveMarket, epoch: Callable[[float], float]):
        self.live = live
        self.epoch = epoch  # epoch seconds of a trace second (the job's clock is the wall)

    def on_demand_usd_per_h(self) -> float | None:
        return self.live.on_demand_usd_per_h

    def zones(self) -> list[str]:
        return self.live.zones

    def spot_price(self, zone: str | None, at_s: float) -> float | None:
        return None if zone is None else self.live.spot_usd_per_h(zone, self.epoch(at_s))

    def bill(self, attempt: AttemptRecord, end_s: float) -> tuple[float, float]:
        start_s = attempt["trace_start_s"] or 0.0
        return self.live.cost_usd(attempt["market"], attempt["zone"], self.epoch(start_s), self.epoch(end_s))

    def asks_policy(self) -> bool:
        return bool(self.live.zones)  # no zone has a price yet: the spec decides, as without a market

    def policy_market(self, at_s: float, blocked: set[str | None]) -> tuple[int, tuple[str, ...], MarketView]:
        return self.live.gap_s, tuple(self.live.zones), self.live.view(self.epoch(at_s))

    def observe(self, zone: str | None, kind: str) -> None:
        self.live.observe(zone, kind, time.time())

    def price_moves(self) -> bool:
        return True

    def price_source(self, attempt: AttemptRecord) -> str | None:
        return "spot price history" if attempt["market"] == Market.SPOT else "catalog"


class Replay:
    """The job's market trace, replayed: availability and prices per tick, the cloud's bill."""

    replayed = True

    def __init__(self, replay: MarketReplay, time_scale: float):
        self.replay = replay
        self._time_scale = time_scale

    def time_scale(self) -> float:
        return self._time_scale

    def on_demand_usd_per_h(self) -> float | None:
        return self.replay.on_demand_usd_per_h()

    def zones(self) -> list[str]:
        return list(self.replay.zones)

    def spot_available(self, zone: str, at_s: float) -> bool:
        return self.replay.available(zone, at_s)

    def spot_price(self, zone: str | None, at_s: float) -> float | None:
        if zone is None:
            return None
        z = self.replay.trace.zone_index(zone)
        return float(self.replay.trace.spot_usd_per_h[z, self.replay.tick_at(at_s)])

    def bill(self, attempt: AttemptRecord, end_s: float) -> tuple[float, float]:
        return self.replay.cost_usd(attempt["market"], attempt["zone"], trace_start_s(attempt), end_s)

    def budget_reached_s(self, attempt: AttemptRecord, left_usd: float) -> float | None:
        """The trace second at which `attempt`'s bill reaches `left_usd`.

        The bill only grows with its end, so a bisection finds the first trace second whose bill
        is at least `left_usd` (to a millisecond): the clock held there bills no less than the
        budget (the rule fires) and no more than a millisecond past it.
        """
        low = high = trace_start_s(attempt)
        if self.bill(attempt, low)[1] >= left_usd:
            return low
        step = 60.0
        while self.bill(attempt, high)[1] < left_usd:
            if step > MAX_BUDGET_SEARCH_S:  # a free market never spends it
                return None
            low, high, step = high, high + step, step * 2
        while high - low > 1e-3:
            mid = (low + high) / 2
            low, high = (low, mid) if self.bill(attempt, mid)[1] >= left_usd else (mid, high)
        return high

    def billed_overhead_s(self, attempt: AttemptRecord, end_s: float, overhead_s: float) -> float | None:
        return max(0.0, min(overhead_s, end_s - trace_start_s(attempt)))

    def mtbf_wall_s(self, zone: str) -> float | None:
        stats = {s.zone: s for s in zone_stats(self.replay.trace)}
        mtbf_h = getattr(stats.get(zone), "mtbf_h", None)
        if not mtbf_h or not math.isfinite(mtbf_h):
            return None
        return float(mtbf_h) * 3600.0 / self._time_scale

    def asks_policy(self) -> bool:
        return True

    def policy_market(self, at_s: float, blocked: set[str | None]) -> tuple[int, tuple[str, ...], MarketView]:
        return self.replay.gap_s, tuple(self.replay.zones), self._view(at_s, blocked)

    def _view(self, at_s: float, blocked_zones: set[str | None]) -> MarketView:
        """The market as the policy sees it at `at_s`: zones that just had no capacity are down."""
        replay = self.replay
        view = replay.view(at_s)
        blocked = [z for z in blocked_zones if z is not None and z in replay.zones]
        if not blocked:
            return view
        trace = replay.trace
        available = trace.available.copy()
        for zone in blocked:
            available[trace.zone_index(zone), view.tick] = False
        return MarketView(trace.zones, trace.gap_s, available, trace.spot_usd_per_h,
                          trace.on_demand_usd_per_h, view.tick)

    def blocked(self, no_capacity: dict[str | None, float], now_s: float) -> set[str | None]:
        tick = self.replay.tick_at(now_s)
        return {z for z, t in no_capacity.items() if self.replay.tick_at(t) == tick}

    def observe(self, zone: str | None, kind: str) -> None:
        pass

    def price_moves(self) -> bool:
        return True

    def price_source(self, attempt: AttemptRecord) -> str | None:
        return "trace"
