"""`spotfit run --backend gcp --dry-run`: the exact `instances.insert` bodies of a job's first attempt.

Nothing is sent, uploaded or recorded: the job id is made up the way `submit` makes one.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from spotfit.backends.base import LaunchRequest, Report
from spotfit.backends.gcp.spec import Gcp, gcp_options
from spotfit.backends.shipping import check_env
from spotfit.host.home import default_store_url
from spotfit.spec.job import load_spec
from spotfit.state.states import Market
from spotfit.stores import child

if TYPE_CHECKING:
    from spotfit.backends.gcp.backend import GcpBackend


def dry_run(path: str, backend: GcpBackend) -> Report:
    """The inserts `launch` would send for attempt 1 of the job spec at `path` (`backend`: the `GcpBackend`)."""
    spec = load_spec(path)
    job_id = f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    job_url = child(spec.checkpoint.store or default_store_url(), "jobs", job_id)
    section = Gcp.of(spec)
    zones = list(spec.market.zones) or list(section.zones)
    request = LaunchRequest(job_id=job_id, attempt=1, job_url=job_url, zone=zones[0] if zones else None,
                            market=Market.SPOT if spec.resources.spot else Market.ON_DEMAND,
                            workers=spec.resources.workers, env=dict(spec.env),
                            accelerator=spec.resources.accelerator, accelerator_count=spec.resources.count,
                            options=gcp_options(spec))
    check_env(request.env)
    inserts = backend.plan(request)
    warnings = []
    if not job_url.startswith(("gs://", "gcs://")):
        warnings.append(f"the job's store {job_url} is not reachable from Compute Engine: set `checkpoint.store: "
                        "gs://BUCKET/PREFIX`; a real run refuses to launch without it")
    if not section.service_account:
        warnings.append("no `gcp.service_account`: the VM cannot read or write the job's bucket")
    script = next(i["value"] for i in inserts[0].body["metadata"]["items"] if i["key"] == "startup-script")
    return {"job_id": job_id, "job_url": job_url, "zone": inserts[0].zone, "sent": False,
            "calls": [i.to_json() for i in inserts],
            "scripts": [{"title": "startup-script (instance metadata, every worker)", "text": script}],
            "warnings": warnings}
