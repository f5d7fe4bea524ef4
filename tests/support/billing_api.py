"""The Cloud Billing Catalog API's `services.skus.list` over HTTP on 127.0.0.1, serving the SKUs a test gives.

The official client (`google-cloud-billing`, REST) reaches it with `client_options={"api_endpoint": url}`
and anonymous credentials. Pages of `page_size` SKUs, linked by `nextPageToken`, so the client pages.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.loopback_http import Handler, LoopbackServer

COMPUTE = "/v1/services/6F81-5844-456A/skus"


def sku(description: str, usage_type: str, regions: list[str], usd: float, group: str = "GPU") -> dict[str, Any]:
    """One SKU document as the API returns it (`units` and `nanos` of USD per hour or GiB-hour)."""
    units = int(usd)
    return {"name": f"services/6F81-5844-456A/skus/{abs(hash(description + usage_type)) % 10**8:08d}",
            "description": description, "serviceRegions": regions,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                         "resourceGroup": group, "usageType": usage_type},
            "pricingInfo": [{"pricingExpression": {"usageUnit": "h", "tieredRates": [
                {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": str(units),
                                                      "nanos": round((usd - units) * 1e9)}}]}}]}


def n1_v100_skus(regions: list[str]) -> list[dict[str, Any]]:
    """The SKUs that price an n1-standard-8 with one V100 (on-demand and spot), at 2026's list prices."""
    return [
        sku("N1 Predefined Instance Core running in Americas", "OnDemand", regions, 0.031611, "CPU"),
        sku("Spot Preemptible N1 Predefined Instance Core running in Americas", "Preemptible", regions, 0.00698, "CPU"),
        sku("N1 Predefined Instance Ram running in Americas", "OnDemand", regions, 0.004237, "RAM"),
        sku("Spot Preemptible N1 Predefined Instance Ram running in Americas", "Preemptible", regions, 0.000936,
            "RAM"),
        sku("Nvidia Tesla V100 GPU running in Americas", "OnDemand", regions, 2.48),
        sku("Spot Preemptible Nvidia Tesla V100 GPU running in Americas", "Preemptible", regions, 0.992),
        sku("Commitment v1: Nvidia Tesla V100 GPU in Americas for 1 Year", "Commit1Yr", regions, 1.56),
    ]


class BillingApi:
    """Serves `skus`; `requests` counts the calls."""

    def __init__(self, skus: list[dict[str, Any]], page_size: int = 2):
        self.skus, self.page_size, self.requests = skus, page_size, 0
        self._http = LoopbackServer(self._handler())
        self.url = self._http.url

    def stop(self) -> None:
        self._http.stop()

    def _handler(self) -> type[Handler]:
        api = self

        class Skus(Handler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                api.requests += 1
                if url.path != COMPUTE:
                    status, doc = 404, {"error": {"code": 404, "message": f"no {url.path}"}}
                else:
                    start = int((parse_qs(url.query).get("pageToken") or ["0"])[0] or 0)
                    end = start + api.page_size
                    status, doc = 200, {"skus": api.skus[start:end],
                                        "nextPageToken": str(end) if end < len(api.skus) else ""}
                self.reply(status, json.dumps(doc), "application/json")

        return Skus
