"""Where an aws attempt runs: a zone's region, and the catalog's instance type for an accelerator.

>>> region_of("us-west-2b"), region_of("us-gov-west-1a"), region_of(None)
('us-west-2', 'us-gov-west-1', None)
>>> instance_type_for("V100", 1, "us-east-1")
'p3.2xlarge'
"""

from __future__ import annotations

import re

from spotfit.errors import UsageError

DEFAULT_REGION = "us-east-1"
_REGION = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)")


def region_of(zone: str | None) -> str | None:
    """`us-west-2b` -> `us-west-2` (None for no zone)."""
    match = _REGION.match(zone or "")
    return match.group(1) if match else None


def instance_type_for(accelerator: str, count: int, region: str) -> str:
    """The cheapest catalog instance type with `count` × `accelerator` (in `region` if listed)."""
    from spotfit.market.catalog import load_catalog

    offers = load_catalog(accelerator=accelerator, count=count, cloud="aws")
    offers = [o for o in offers if o.region == region and o.instance_type] or [o for o in offers if o.instance_type]
    if not offers:
        raise UsageError(f"No AWS instance type in the catalog has {count} × {accelerator!r}.",
                         hint="Set `aws.instance_type` in the job spec, or see `spotfit catalog --cloud aws`.")
    return str(offers[0].instance_type)

