"""`spotfit run --backend kubernetes --dry-run`: the exact objects of a job's first attempt.

Nothing is sent and nothing is recorded; no cluster is needed. The job id is made up the
way `submit` makes one. With several workers and `kubernetes.multi_worker: auto`, the objects
are the Indexed Job fallback (the dry run cannot ask whether the TFJob CRD is installed;
`multi_worker: tfjob` prints the TFJob). Values of `kubernetes.secret_env` show as `<from $NAME>`.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from spotfit.backends.base import LaunchRequest, Report, backend_options
from spotfit.backends.kubernetes import manifests as mf
from spotfit.backends.kubernetes.spec import Kubernetes
from spotfit.host.home import default_store_url
from spotfit.spec.job import load_spec
from spotfit.state.states import Market
from spotfit.stores import child

if TYPE_CHECKING:
    from spotfit.backends.kubernetes.backend import KubernetesBackend


def dry_run(path: str, backend: KubernetesBackend) -> Report:
    """The objects `launch` would create for attempt 1 of the job spec at `path` (`backend`: the
    `KubernetesBackend` asked)."""
    spec = load_spec(path)
    spec.backend = "kubernetes"
    job_id = f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    job_url = child(spec.checkpoint.store or default_store_url(), "jobs", job_id)
    request = LaunchRequest(job_id=job_id, attempt=1, job_url=job_url, zone=None,
                            market=Market.SPOT if spec.resources.spot else Market.ON_DEMAND,
                            workers=spec.resources.workers, env=dict(spec.env),
                            accelerator=spec.resources.accelerator, accelerator_count=spec.resources.count,
                            options=backend_options(spec))
    tfjob = Kubernetes.of(spec).multi_worker == "tfjob"
    s = backend.settings(request, tfjob=tfjob)
    objects = mf.attempt_objects(s, {n: f"<from ${n}>" for n in s.secret_env})
    warnings = []
    if job_url.startswith(("file://", "memory://")):
        warnings.append(f"the job's store {job_url} is not reachable from the pods: set `checkpoint.store: "
                        "s3://BUCKET/PREFIX` (or gs://); a real run refuses to launch without it")
    if s.workers > 1 and Kubernetes.of(spec).multi_worker == "auto":
        warnings.append("several workers: shown as the Indexed Job + headless Service fallback; a run uses a "
                        "TFJob instead when the cluster has the TFJob CRD")
    if not Kubernetes.of(spec).service_account:
        warnings.append("no `kubernetes.service_account`: the pods need one with access to the job's store "
                        "(IRSA on EKS, workload identity on GKE)")
    return {"job_id": job_id, "job_url": job_url, "market": request.market, "sent": False, "kind": s.kind,
            "objects": objects, "warnings": warnings}
