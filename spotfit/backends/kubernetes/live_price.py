"""A spot node's live price, where the node profile names a cloud whose prices spotfit can read.

With `kubernetes.live_prices: true`, a spot node on AWS (the `eks` profile, or any node whose
`spec.providerID` is `aws:///ZONE/INSTANCE-ID`) is priced from the EC2 spot price history
(`DescribeSpotPriceHistory`, read through the aws backend's `prices.spot_price_history`): the
latest price published for its instance type in its zone (`topology.kubernetes.io/zone`). GKE
and AKS nodes have no reader here. A read that gives no price (no zone label, no credentials, no
permission, nothing published) returns why, and the node is priced from the catalog instead
(`nodes.py`).

Example:

>>> cloud_of("eks", None), cloud_of("custom", "aws:///us-east-1a/i-0abc"), cloud_of("gke", None)
('aws', 'aws', None)
>>> from datetime import datetime
>>> at = lambda h: datetime(2026, 12, 2, h)
>>> latest([PricePoint("us-east-1a", at(8), 0.9), PricePoint("us-east-1a", at(9), 0.3),
...         PricePoint("us-east-1b", at(9), 0.5)], "us-east-1a", at(10))
0.3
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from spotfit.backends.aws.prices import PricePoint, spot_price_history

if TYPE_CHECKING:
    from spotfit.backends.kubernetes.spec import Kubernetes

SOURCE = "aws spot price history"
HISTORY_S = 86400.0  # a zone's price in force is the last one published in the day before now
LiveLookup = Callable[[str, str | None, str | None], tuple[float | None, str | None]]


def cloud_of(profile: str | None, provider_id: str | None) -> str | None:
    """`aws` when the node runs on EC2 (the `eks` profile, or its providerID says so); None when unknown."""
    if profile == "eks" or (provider_id or "").startswith("aws://"):
        return "aws"
    return None


def latest(points: list[PricePoint], zone: str, now: datetime) -> float | None:
    """The last price published in `zone` at or before `now`."""
    seen = [p for p in points if p.zone == zone and p.timestamp <= now]
    return max(seen, key=lambda p: p.timestamp).spot_usd_per_h if seen else None


class AwsSpotPrices:
    """`(instance_type, region, zone) -> ($/h, None)`, or `(None, why)` when no live price can be read."""

    def __init__(self, session: Any = None, now: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self._session = session  # a boto3 Session (tests: moto's); default one made on first use
        self._now = now
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _ec2(self, region: str) -> Any:
        with self._lock:
            if self._session is None:
                from spotfit.backends.aws.client import load_boto3

                self._session = load_boto3().Session()
            if region not in self._clients:
                self._clients[region] = self._session.client("ec2", region_name=region)
            return self._clients[region]

    def __call__(self, instance_type: str, region: str | None, zone: str | None) -> tuple[float | None, str | None]:
        if not zone:
            return None, "no live price: the node has no topology.kubernetes.io/zone label"
        region = region or zone.rstrip("abcdefghijklmnopqrstuvwxyz")  # us-east-1a -> us-east-1
        now = self._now().astimezone(UTC).replace(tzinfo=None)
        try:
            points = spot_price_history(self._ec2(region), instance_type, now - timedelta(seconds=HISTORY_S), now)
        except Exception as exc:  # noqa: BLE001 — any failure to ask (credentials, permission, SDK): the catalog
            from spotfit.backends.aws.client import sdk_failure

            return None, f"no live price: {sdk_failure(exc) or f'{type(exc).__name__}: {exc}'}"
        usd = latest(points, zone, now)
        if usd is None:
            return None, f"no live price: none published for {instance_type} in {zone}"
        return usd, None


class LivePrices:
    """The backend's live readers: which one, if any, prices a node under the spec's `kubernetes:` section."""

    def __init__(self, aws_session: Any = None):
        self._aws = AwsSpotPrices(aws_session)

    def lookup(self, section: Kubernetes, node: dict[str, Any] | None = None) -> LiveLookup | None:
        """The reader of `node`'s cloud (of any node when None) when `section.live_prices` asks for one."""
        if not section.live_prices:
            return None
        provider_id = ((node or {}).get("spec") or {}).get("providerID")
        return self._aws if node is None or cloud_of(section.spot, provider_id) == "aws" else None
