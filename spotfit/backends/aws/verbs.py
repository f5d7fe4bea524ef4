"""The aws backend's answers to `spotfit gc` and `spotfit market record` (backends/base.py:
`LeftoverCollector`, `MarketRecorder`): arguments checked here, before any AWS call.

>>> default_regions({"AWS_REGION": "eu-west-1"}), default_regions({})
(['eu-west-1'], ['us-east-1'])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from spotfit.core import arguments

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Session
    from spotfit.backends.base import LeftoverReport, Report
    from spotfit.state.db import StateDB

REGION = r"[a-z]{2}(-[a-z]+)+-\d{1,2}"


def default_regions(environ: Mapping[str, str] = os.environ) -> list[str]:
    """$AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1."""
    return [environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1"]


def leftovers(places: list[str] | None, keep: set[str], job: str | None, dry_run: bool,
              ended_secrets: dict[str, str], keep_sources: set[str] | None = None,
              session: Session | None = None) -> LeftoverReport:
    """EC2 resources by tag in `places` (default: `default_regions`), the data snapshots none of whose
    sources is in `keep_sources` (None: none touched), then the SSM secrets of ended jobs."""
    from spotfit.backends.aws.gc import collect, collect_secrets

    for region in places or []:
        arguments.text("--region", region, pattern=REGION, expected="an AWS region such as us-east-1",
                       hint="Pass --region us-east-1 (repeat it for more regions).")
    report = collect(places or default_regions(), keep=keep, job=job, dry_run=dry_run, keep_sources=keep_sources,
                     session=session)
    report["secrets"] = collect_secrets(ended_secrets, dry_run=dry_run, session=session)
    return report


def record_live(region: str, instance_type: str, path: str, zones: list[str] | None, hours: float, gap_s: int,
                state: StateDB, session: Session | None = None) -> Report:
    """Append `instance_type`'s spot price history in `region` and the outages `state` saw to `path`."""
    from spotfit.backends.aws.client import load_boto3, sdk_errors
    from spotfit.backends.aws.record import observed_outages, record

    arguments.text("--region", region, pattern=REGION, expected="an AWS region such as us-east-1",
                   hint="Pass --region us-east-1.")
    arguments.number("--hours", hours, low=0.1, high=24 * 90, hint="AWS keeps 90 days of spot price history.")
    with sdk_errors(f"Could not read the spot price history of {instance_type} in {region}",
                    hint="Check the credentials (`aws sts get-caller-identity`) and the region; the "
                         "controller's IAM policy in docs/aws.md allows ec2:DescribeSpotPriceHistory."):
        ec2 = (session or load_boto3().Session()).client("ec2", region_name=region)
        return record(ec2, instance_type, path, zones, observed_outages(state, region, instance_type), hours, gap_s)
