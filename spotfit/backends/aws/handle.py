"""`AwsHandle`: what the aws backend remembers about an attempt, enough to watch and release it.

Everything `status`, `preempt`, `stop` and `spotfit cancel` need is in the handle, so any
process can act on an attempt from its stored text alone. The text is the JSON object the
backend stored before handles were typed (same keys), so older state DBs still read.

>>> h = AwsHandle(region="us-west-2", job="j1", attempt=2, job_url="s3://b/jobs/j1", instances=("i-1",))
>>> AwsHandle.from_json(h.to_json()) == h
True
>>> h.to_json()[:40]
'{"region": "us-west-2", "job": "j1", "at'
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class AwsHandle:
    """One attempt on EC2: its instances (worker order) and the groups made for it."""

    region: str
    job: str
    attempt: int
    job_url: str
    instances: tuple[str, ...] = ()
    security_group: str | None = None
    placement_group: str | None = None

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "instances": list(self.instances)})

    @classmethod
    def from_json(cls, text: str) -> AwsHandle:
        info = json.loads(text)
        return cls(region=info["region"], job=info["job"], attempt=int(info["attempt"]), job_url=info["job_url"],
                   instances=tuple(info.get("instances") or ()), security_group=info.get("security_group"),
                   placement_group=info.get("placement_group"))
