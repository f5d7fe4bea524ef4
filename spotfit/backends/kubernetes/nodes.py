"""What an attempt's node costs: its instance type and capacity type, priced live, from the catalog or the spec.

A node's labels say what it is: `node.kubernetes.io/instance-type` (set by the kubelet on every
cloud), `topology.kubernetes.io/region` and `/zone`, and whether it is spot, from Karpenter
(`karpenter.sh/capacity-type: spot|on-demand`), EKS managed node groups
(`eks.amazonaws.com/capacityType: SPOT|ON_DEMAND`), GKE (`cloud.google.com/gke-spot: "true"`) or
AKS (`kubernetes.azure.com/scalesetpriority: spot`); without one the attempt's own market
(the pool it asked for) counts. A spot node whose cloud's live price can be read (`live`:
live_price.py, with `kubernetes.live_prices`) is priced live; else (and when the read gives no
price, the reason kept in `note`) the price is the bundled catalog's for that instance type
(spotfit/market/catalog.py): the zone's row when the zone label names one, else the mean over
the region's rows (the catalog names zones by id, `use1-az1`, where nodes say `us-east-1a`),
else over every region; when the catalog does not know the type (or has no spot price for it),
the spec's `kubernetes.price_usd_per_h`, else no price (the attempt then costs $0, as before).
`reprice` reads a live-priced node's price again (the controller does, as the attempt runs and
while a `price_cap` pause waits); the others' prices do not move.

Example:

>>> labels = {INSTANCE_TYPE: "p3.2xlarge", REGION: "us-east-1", KARPENTER: "spot"}
>>> p = price_node("n1", labels, "spot", spec_usd_per_h=None)
>>> p.market, p.source, round(p.usd_per_h, 4), p.on_demand_usd_per_h
('spot', 'catalog', 0.3967, 3.06)
>>> price_node("n2", {INSTANCE_TYPE: "my-box"}, "on_demand", spec_usd_per_h=2.5).describe()
'node n2 (my-box, on_demand): $2.5/h from kubernetes.price_usd_per_h'
>>> quotes = iter([(0.9, None), (0.3, None)])  # a live reader's answers, as the cloud's price falls
>>> live = lambda instance_type, region, zone: next(quotes)
>>> p = price_node("n3", labels, "spot", None, live)
>>> p.describe(), reprice(p, live).usd_per_h
('node n3 (p3.2xlarge, spot): $0.9/h from aws spot price history', 0.3)
"""

from __future__ import annotations

from dataclasses import replace
from statistics import mean

from spotfit.backends.base import NodePrice
from spotfit.backends.kubernetes.live_price import SOURCE as LIVE_SOURCE
from spotfit.backends.kubernetes.live_price import LiveLookup
from spotfit.market.catalog import CatalogOffer, load_catalog

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LEGACY_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
KARPENTER = "karpenter.sh/capacity-type"
EKS = "eks.amazonaws.com/capacityType"
# label -> {value: market}; the first label a node has decides.
CAPACITY_LABELS = {
    KARPENTER: {"spot": "spot", "on-demand": "on_demand"},
    EKS: {"SPOT": "spot", "ON_DEMAND": "on_demand"},
    "cloud.google.com/gke-spot": {"true": "spot"},
    "kubernetes.azure.com/scalesetpriority": {"spot": "spot", "regular": "on_demand"},
}


def market_of(labels: dict[str, str], launched: str) -> str:
    """`spot` or `on_demand` from the node's capacity label, else the market the attempt was launched on."""
    for label, values in CAPACITY_LABELS.items():
        if label in labels:
            return values.get(labels[label], "on_demand")
    return launched


def price_node(node: str, labels: dict[str, str], launched: str, spec_usd_per_h: float | None,
               live: LiveLookup | None = None) -> NodePrice:
    """Price one node from its labels (see the module docstring for the order); `live` reads its cloud's price."""
    instance_type = labels.get(INSTANCE_TYPE) or labels.get(LEGACY_INSTANCE_TYPE)
    market = market_of(labels, launched)
    region, zone = labels.get(REGION), labels.get(ZONE)
    rows = _rows(instance_type, region, zone) if instance_type else []
    on_demand = _mean([r.on_demand_usd_per_h for r in rows])
    usd, source, note = None, None, None
    live = live if market == "spot" and instance_type else None
    if live is not None and instance_type:
        usd, note = live(instance_type, region, zone)
        source = LIVE_SOURCE if usd is not None else None
    if usd is None:
        usd = _mean([r.spot_usd_per_h for r in rows]) if market == "spot" else on_demand
        source = "catalog" if usd is not None else None
    if usd is None and spec_usd_per_h is not None:
        usd, source = spec_usd_per_h, "kubernetes.price_usd_per_h"
    return NodePrice(node=node, instance_type=instance_type, market=market, usd_per_h=usd, source=source,
                     on_demand_usd_per_h=on_demand, zone=zone, region=region, live=live is not None, note=note)


def reprice(price: NodePrice, live: LiveLookup | None) -> NodePrice:
    """A live-priced node's price read again now (kept as it was when the read gives none)."""
    if not price.live or live is None or price.instance_type is None:
        return price
    usd, _ = live(price.instance_type, price.region, price.zone)
    return price if usd is None else replace(price, usd_per_h=usd, source=LIVE_SOURCE, note=None)


def _rows(instance_type: str, region: str | None, zone: str | None) -> list[CatalogOffer]:
    """The catalog rows of the type: the zone's, else the region's, else every region's."""
    rows = [o for o in load_catalog() if o.instance_type == instance_type]
    for narrower in ([o for o in rows if zone and o.zone == zone], [o for o in rows if region and o.region == region]):
        if narrower:
            return narrower
    return rows


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return mean(known) if known else None
