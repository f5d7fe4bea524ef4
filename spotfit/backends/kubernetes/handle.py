"""`KubernetesHandle`: what the kubernetes backend remembers about an attempt.

Everything `status`, `preempt`, `stop` and `spotfit cancel` need: where (kubeconfig, context,
namespace), what (the kind and name of the attempt's objects, its Service and Secret), and
the job's store (the exit record when the pods are gone).

>>> h = KubernetesHandle(namespace="ml", name="sf-j1-2", kind="Job", job="j1", attempt=2, job_url="s3://b/jobs/j1")
>>> KubernetesHandle.from_json(h.to_json()) == h
True
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class KubernetesHandle:
    """One attempt's objects in a cluster."""

    namespace: str
    name: str
    kind: str  # "Job", "IndexedJob" or "TFJob"
    job: str
    attempt: int
    job_url: str
    workers: int = 1
    kubeconfig: str | None = None
    context: str | None = None
    service: str | None = None
    secret: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> KubernetesHandle:
        info = json.loads(text)
        return cls(**{k: info.get(k) for k in cls.__dataclass_fields__ if k in info})
