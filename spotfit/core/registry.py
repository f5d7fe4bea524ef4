"""The backends spotfit launches on: each name, its class and its spec section, imported on first use.

Adding a backend is a folder under `backends/` and one line here. An entry names the backend's
class and, when it has settings, the `BackendSection` of the job spec that holds them (the
`aws:` of a spec is `backends/aws/spec.py:Aws`): the spec (`spec/job.py`) builds its backend
fields from these lines. The registry imports nothing at import time, so that the planner
(`market/offers.py`: which clouds a plan may launch on), the spec and the backends' base
(`backends/base.py:backend_class`) all read it without importing each other.

>>> registered_backends()
['aws', 'gcp', 'kubernetes', 'local']
>>> BACKENDS["aws"].section, BACKENDS["local"].section
('spotfit.backends.aws.spec:Aws', None)
>>> load("spotfit.core.registry:registered_backends") is registered_backends
True
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One backend: its class and its spec section (`None`: no settings), each as `module:Class`."""

    backend: str
    section: str | None = None


BACKENDS = {
    "local": Entry("spotfit.backends.local:LocalBackend"),
    "aws": Entry("spotfit.backends.aws.backend:AwsBackend", section="spotfit.backends.aws.spec:Aws"),
    "kubernetes": Entry("spotfit.backends.kubernetes.backend:KubernetesBackend",
                        section="spotfit.backends.kubernetes.spec:Kubernetes"),
    "gcp": Entry("spotfit.backends.gcp.backend:GcpBackend", section="spotfit.backends.gcp.spec:Gcp"),
}


def registered_backends() -> list[str]:
    """Names `make_backend` knows, sorted."""
    return sorted(BACKENDS)


def load(target: str) -> Any:
    """The object a `module:name` target names, its module imported now."""
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def section_targets() -> dict[str, str]:
    """Each backend with settings: its name (the spec's key) and its section class as `module:Class`."""
    return {name: entry.section for name, entry in sorted(BACKENDS.items()) if entry.section is not None}
