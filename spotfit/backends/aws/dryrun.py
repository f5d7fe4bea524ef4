"""`spotfit run --backend aws --dry-run`: the exact EC2 requests of a job's first attempt.

Nothing is sent and nothing is recorded: the job id is made up the way `submit` makes one,
values only AWS can tell (the image id when `aws.ami` is not an `ami-` id, the default VPC,
the new security group's id) appear as placeholders such as `{image_id}`.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from spotfit.backends.aws.spec import Aws, aws_options
from spotfit.backends.base import LaunchRequest
from spotfit.backends.shipping import check_env
from spotfit.host.home import default_store_url
from spotfit.spec.job import load_spec
from spotfit.state.states import Market
from spotfit.stores import child

if TYPE_CHECKING:
    from spotfit.backends.aws.backend import AwsBackend
    from spotfit.backends.aws.disks import DiskPlan
    from spotfit.backends.base import Report


def dry_run(path: str, backend: AwsBackend) -> Report:
    """The calls `launch` would send for attempt 1 of the job spec at `path` (`backend`: the `AwsBackend` asked)."""
    spec = load_spec(path)
    job_id = f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    job_url = child(spec.checkpoint.store or default_store_url(), "jobs", job_id)
    zone = spec.market.zones[0] if spec.market.zones else None
    request = LaunchRequest(job_id=job_id, attempt=1, job_url=job_url, zone=zone,
                            market=Market.SPOT if spec.resources.spot else Market.ON_DEMAND,
                            workers=spec.resources.workers, env=dict(spec.env),
                            accelerator=spec.resources.accelerator, accelerator_count=spec.resources.count,
                            options=aws_options(spec))
    check_env(request.env)
    calls = backend.plan(request, lookup=False)
    settings = backend.settings(request, lookup=False)
    warnings: list[str] = []
    if job_url.startswith(("file://", "memory://")):
        warnings.append(f"the job's store {job_url} is not reachable from EC2: set `checkpoint.store: "
                        "s3://BUCKET/PREFIX`; a real run refuses to launch without it")
    if not Aws.of(spec).iam_instance_profile:
        warnings.append("no `aws.iam_instance_profile`: the instance cannot read or write the job's bucket")
    disk = settings.data_volume.describe() if settings.data_volume else describe_disk(settings.disk)
    return {"job_id": job_id, "job_url": job_url, "zone": zone, "sent": False,
            "disk": disk, "calls": [c.to_json() for c in calls], "warnings": warnings}


def describe_disk(disk: DiskPlan) -> str:
    """One line on where the data cache lives (a `disks.DiskPlan`), for the dry run's summary."""
    from spotfit.backends.aws.disks import NVME_MOUNT

    if disk.nvme_cache:
        return f"data cache on the instance-store NVMe ({NVME_MOUNT}); root volume: the image's default"
    if disk.size_gib is None:
        return "root volume: the image's default (set `data.size_gib` to size it for the dataset)"
    device = disk.block_device_mappings[0]["DeviceName"]
    return (f"root volume {device}: gp3 {disk.size_gib} GiB, {disk.iops} IOPS, "
            f"{disk.throughput_mibps} MiB/s (sized for `data.size_gib`)")
