"""Attempts billed at their nodes' prices (`NodePriced`): a live price read again moves the bill and the cap's price.

Stand-in lookups give the nodes' prices as the Kubernetes backend does (its reads are tested on the
emulator and moto in tests/backends/kube/); here the trace seconds are given, not waited for.
"""

from __future__ import annotations

import pytest

from spotfit.backends.base import NodePrice
from spotfit.controller import node_market
from spotfit.controller.node_market import NodePriced

ATTEMPT = {"number": 1, "handle": "{}", "trace_start_s": 0.0}


def _node(usd: float, live: bool, source: str = "aws spot price history") -> NodePrice:
    return NodePrice("n1", "p3.2xlarge", "spot", usd, source, on_demand_usd_per_h=3.06, live=live)


def test_a_live_price_read_again_bills_each_span_at_its_price_and_moves_the_cap_price(monkeypatch):
    monkeypatch.setattr(node_market, "REPRICE_S", 0.0)
    quotes = iter([0.3])
    priced: list[list[float | None]] = []
    market = NodePriced(lambda attempt: [_node(0.9, live=True)], lambda a, prices: priced.append(
        [p.usd_per_h for p in prices]), reprice=lambda prices: [_node(next(quotes, 0.3), live=True)])
    assert market.bill(ATTEMPT, 1800.0) == (1800.0, pytest.approx(0.9 / 2))  # read again at 1800 s: $0.3 from then on
    assert market.bill(ATTEMPT, 3600.0) == (3600.0, pytest.approx(0.9 / 2 + 0.3 / 2))
    assert market.bill(ATTEMPT, 900.0) == (900.0, pytest.approx(0.9 / 4))  # an earlier end: the first span only
    assert market.spot_price(None, 4000.0) == 0.3 and market.price_moves()
    assert priced == [[0.9], [0.3]]  # the first price and the one that moved (node_price events)
    assert market.price_source(ATTEMPT) == "aws spot price history"


def test_a_catalog_price_is_not_read_again_and_does_not_move(monkeypatch):
    monkeypatch.setattr(node_market, "REPRICE_S", 0.0)
    asked = []
    market = NodePriced(lambda attempt: [_node(0.4, live=False, source="catalog")], lambda a, prices: None,
                        reprice=lambda prices: asked.append(prices) or prices)
    assert market.bill(ATTEMPT, 3600.0) == (3600.0, pytest.approx(0.4))
    assert market.spot_price(None, 7200.0) == 0.4
    assert asked == [] and not market.price_moves()  # a `price_cap` pause on it ends its controller
