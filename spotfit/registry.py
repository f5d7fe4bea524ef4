"""The backends spotfit launches on: each name and its class as `module:Class`, imported on first use.

Adding a backend is a folder under `backends/` and one line here. The registry imports nothing,
so that the planner (`market/offers.py`: which clouds a plan may launch on) and the backends'
base (`backends/base.py:backend_class`) both read it without importing each other.

>>> registered_backends()
['aws', 'gcp', 'kubernetes', 'local']
"""

from __future__ import annotations

BACKENDS = {
    "local": "spotfit.backends.local:LocalBackend",
    "aws": "spotfit.backends.aws.backend:AwsBackend",
    "kubernetes": "spotfit.backends.kubernetes.backend:KubernetesBackend",
    "gcp": "spotfit.backends.gcp.backend:GcpBackend",
}


def registered_backends() -> list[str]:
    """Names `make_backend` knows, sorted."""
    return sorted(BACKENDS)
