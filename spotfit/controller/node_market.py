"""Billing attempts at the price of the nodes they run on: Kubernetes without a trace.

A cluster publishes no price, but its nodes say what they are (instance type, spot or
on-demand: backends/kubernetes/nodes.py). `NodePriced` asks the backend, once the attempt's
pods have nodes, for each node's price, and bills the attempt as the other market sources do:
billed seconds (launch to now) × the nodes' $/h. A price read live from the cloud
(`kubernetes.live_prices`) is read again every `REPRICE_S` through `reprice`, while the attempt
runs and after it (what a `price_cap` pause waits on): the bill adds each span at the price
then in force, and the rules see the price now. A catalog or spec price does not move. The
`budget` and `price_cap` rules and the team budgets then see a cost and a spot price. Until the
pods have nodes, or when no price is known, the attempt counts $0 (as without this market).

Example (stand-in lookups, as the backend gives after the pod landed on a spot node):

>>> from spotfit.backends.base import NodePrice
>>> seen = []
>>> node = NodePrice("n1", "g5.xlarge", "spot", 0.36, "catalog", on_demand_usd_per_h=1.0)
>>> market = NodePriced(lambda attempt: [node], lambda attempt, prices: seen.append(prices))
>>> attempt = {"number": 1, "handle": "{}", "trace_start_s": 0.0}
>>> market.bill(attempt, 3600.0), market.spot_price(None, 3600.0), market.on_demand_usd_per_h(), len(seen)
((3600.0, 0.36), 0.36, 1.0, 1)
>>> market.price_moves(), market.price_source(attempt)
(False, 'catalog')
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

from spotfit.backends.base import NodePrice
from spotfit.controller.market_source import NoMarket
from spotfit.state.records import AttemptRecord

LOOKUP_EVERY_S = 5.0  # while an attempt's pods have no node (or the API fails): ask again this often
REPRICE_S = 300.0  # a live node price is read again this often (AWS publishes a spot price when it changes)

Lookup = Callable[[AttemptRecord], list[NodePrice]]
Reprice = Callable[[list[NodePrice]], list[NodePrice]]


class NodePriced(NoMarket):
    """Each attempt billed at its nodes' prices; `lookup(attempt)` asks the backend (`[]`: no node yet),
    `reprice(prices)` reads live prices again; `on_priced` hears of each attempt's first and moved prices."""

    def __init__(self, lookup: Lookup, on_priced: Callable[[AttemptRecord, list[NodePrice]], None],
                 reprice: Reprice | None = None):
        self._lookup = lookup
        self._on_priced = on_priced
        self._reprice = reprice
        self._prices: dict[int, list[NodePrice]] = {}  # attempt -> its nodes, as last read
        self._spans: dict[int, list[tuple[float, float]]] = {}  # attempt -> (trace s, $/h from then on)
        self._asked: dict[int, float] = {}  # attempt -> monotonic s of the last lookup
        self._repriced: dict[int, float] = {}  # attempt -> monotonic s of the last live read
        self._current: int | None = None  # the attempt billed last: the live one, whose spot price rules see
        self._records: dict[int, AttemptRecord] = {}

    def prices(self, attempt: AttemptRecord) -> list[NodePrice]:
        """The attempt's nodes' prices, looked up (at most every `LOOKUP_EVERY_S`) until its pods have nodes."""
        number = attempt["number"]
        if number in self._prices or not attempt.get("handle"):
            return self._prices.get(number, [])
        now = time.monotonic()
        if now - self._asked.get(number, -math.inf) < LOOKUP_EVERY_S:
            return []
        self._asked[number] = self._repriced[number] = now
        try:
            found = self._lookup(attempt)
        except Exception:  # noqa: BLE001 — an API error (a node gone, RBAC) must not stop the controller: ask later
            return []
        if found:
            self._prices[number] = found
            self._spans[number] = [(attempt["trace_start_s"] or 0.0, _total(found) or 0.0)]
            self._records[number] = attempt
            self._on_priced(attempt, found)
        return found

    def _read_again(self, number: int | None, at_s: float) -> None:
        """Every `REPRICE_S`: the live prices of the attempt's nodes again; a moved total starts a new span."""
        found = self._prices.get(number) if number is not None else None
        if number is None or not found or self._reprice is None or not any(p.live for p in found):
            return
        if time.monotonic() - self._repriced.get(number, -math.inf) < REPRICE_S:
            return
        self._repriced[number] = time.monotonic()
        try:
            fresh = self._reprice(found)
        except Exception:  # noqa: BLE001 — a failed read keeps the price known
            return
        if _total(fresh) != _total(found):
            self._prices[number] = fresh
            self._spans[number].append((at_s, _total(fresh) or 0.0))
            self._on_priced(self._records[number], fresh)

    def bill(self, attempt: AttemptRecord, end_s: float) -> tuple[float, float]:
        start_s = attempt["trace_start_s"] or 0.0
        billed_s = max(end_s - start_s, 0.0)
        self._current = attempt["number"]
        self.prices(attempt)
        self._read_again(attempt["number"], end_s)
        spans = [(max(t, start_s), usd) for t, usd in self._spans.get(attempt["number"], []) if t < end_s]
        ends = [t for t, _ in spans[1:]] + [end_s]
        return billed_s, sum((stop - t) * usd for (t, usd), stop in zip(spans, ends, strict=False)) / 3600.0

    def spot_price(self, zone: str | None, at_s: float) -> float | None:
        """The nodes' $/h now when they are spot nodes (what `price_cap` compares): the live attempt's, or
        after it ended (a `price_cap` pause), the last attempt's nodes' price read again."""
        self._read_again(self._current, at_s)
        found = self._prices.get(self._current) if self._current is not None else None
        if not found or any(p.market != "spot" for p in found):
            return None
        return _total(found)

    def on_demand_usd_per_h(self) -> float | None:
        found = self._prices.get(self._current) if self._current is not None else None
        return _total([replace(p, usd_per_h=p.on_demand_usd_per_h) for p in found or []])

    def price_moves(self) -> bool:
        """Whether the last attempt's price is read live (a `price_cap` pause can then end by itself)."""
        return any(p.live for p in self._prices.get(self._current, [])) if self._current is not None else False

    def price_source(self, attempt: AttemptRecord) -> str | None:
        """Where the attempt's nodes' prices came from (`aws spot price history`, `catalog`, ...)."""
        sources = sorted({p.source for p in self._prices.get(attempt["number"], []) if p.source})
        return ", ".join(sources) or None


def _total(prices: list[NodePrice]) -> float | None:
    """The nodes' $/h together; None when any has no price."""
    values = [p.usd_per_h for p in prices]
    return sum(v for v in values if v is not None) if values and None not in values else None
