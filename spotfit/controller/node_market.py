"""Billing attempts at the price of the nodes they run on: Kubernetes without a trace.

A cluster publishes no price, but its nodes say what they are (instance type, spot or
on-demand: backends/kubernetes/nodes.py). `NodePriced` asks the backend, once the attempt's
pods have nodes, for each node's price, keeps it for the attempt's life, and bills the attempt
as the other market sources do: billed seconds (launch to now) × the nodes' $/h. The `budget`
and `price_cap` rules and the team budgets then see a cost and a spot price. Until the pods
have nodes, or when no price is known, the attempt counts $0 (as without this market).

Example (a stand-in lookup, as the backend gives after the pod landed on a spot node):

>>> from spotfit.backends.kubernetes.nodes import NodePrice
>>> seen = []
>>> node = NodePrice("n1", "g5.xlarge", "spot", 0.36, "catalog", on_demand_usd_per_h=1.0)
>>> market = NodePriced(lambda attempt: [node], lambda attempt, prices: seen.append(prices))
>>> attempt = {"number": 1, "handle": "{}", "trace_start_s": 0.0}
>>> market.bill(attempt, 3600.0), market.spot_price(None, 3600.0), market.on_demand_usd_per_h(), len(seen)
((3600.0, 0.36), 0.36, 1.0, 1)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from spotfit.backends.kubernetes.nodes import NodePrice
from spotfit.controller.market_source import NoMarket
from spotfit.state.records import AttemptRecord

LOOKUP_EVERY_S = 5.0  # while an attempt's pods have no node (or the API fails): ask again this often


class NodePriced(NoMarket):
    """Each attempt billed at its nodes' prices; `lookup(attempt)` asks the backend (`[]`: no node yet)."""

    def __init__(self, lookup: Callable[[AttemptRecord], list[NodePrice]],
                 on_priced: Callable[[AttemptRecord, list[NodePrice]], None]):
        self._lookup = lookup
        self._on_priced = on_priced
        self._prices: dict[int, list[NodePrice]] = {}
        self._asked: dict[int, float] = {}  # attempt -> monotonic s of the last lookup
        self._current: int | None = None  # the attempt billed last: the live one, whose spot price rules see

    def prices(self, attempt: AttemptRecord) -> list[NodePrice]:
        """The attempt's nodes' prices, looked up (at most every `LOOKUP_EVERY_S`) until its pods have nodes."""
        number = attempt["number"]
        if number in self._prices or not attempt.get("handle"):
            return self._prices.get(number, [])
        now = time.monotonic()
        if now - self._asked.get(number, -math.inf) < LOOKUP_EVERY_S:
            return []
        self._asked[number] = now
        try:
            found = self._lookup(attempt)
        except Exception:  # noqa: BLE001 — an API error (a node gone, RBAC) must not stop the controller: ask later
            return []
        if found:
            self._prices[number] = found
            self._on_priced(attempt, found)
        return found

    def _usd_per_h(self, number: int | None, field: str = "usd_per_h") -> float | None:
        found = self._prices.get(number) if number is not None else None
        values = [getattr(p, field) for p in found or []]
        return sum(values) if values and None not in values else None

    def bill(self, attempt: AttemptRecord, end_s: float) -> tuple[float, float]:
        billed_s = max(end_s - (attempt["trace_start_s"] or 0.0), 0.0)
        self._current = attempt["number"]
        self.prices(attempt)
        usd_per_h = self._usd_per_h(attempt["number"]) or 0.0
        return billed_s, billed_s * usd_per_h / 3600.0

    def spot_price(self, zone: str | None, at_s: float) -> float | None:
        """The live attempt's nodes' $/h when they are spot nodes (what `price_cap` compares)."""
        found = self._prices.get(self._current) if self._current is not None else None
        if not found or any(p.market != "spot" for p in found):
            return None
        return self._usd_per_h(self._current)

    def on_demand_usd_per_h(self) -> float | None:
        return self._usd_per_h(self._current, "on_demand_usd_per_h")
