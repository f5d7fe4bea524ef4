"""`GcpHandle`: what the gcp backend remembers about an attempt, enough to watch and release it.

>>> h = GcpHandle(project="p-1", zone="us-central1-a", job="j1", attempt=2, job_url="gs://b/jobs/j1",
...               instances=("spotfit-j1-0002-w0",))
>>> GcpHandle.from_json(h.to_json()) == h
True
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GcpHandle:
    """One attempt on Compute Engine: its VMs' names (worker order) in one zone of one project."""

    project: str
    zone: str
    job: str
    attempt: int
    job_url: str
    instances: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "instances": list(self.instances)})

    @classmethod
    def from_json(cls, text: str) -> GcpHandle:
        info = json.loads(text)
        return cls(project=info["project"], zone=info["zone"], job=info["job"], attempt=int(info["attempt"]),
                   job_url=info["job_url"], instances=tuple(info.get("instances") or ()))
