"""Reaching a running Kubernetes attempt: `kubectl exec` and `kubectl port-forward` on its Job.

>>> from spotfit.backends.kubernetes.handle import KubernetesHandle
>>> h = KubernetesHandle(namespace="ml", name="nb-1", kind="Job", job="nb", attempt=1, job_url="file:///s")
>>> from spotfit.backends.base import LaunchOptions
>>> port_forward_command(h, LaunchOptions(), 8888, 8888)
['kubectl', '--namespace', 'ml', 'port-forward', '--address', '127.0.0.1', 'job/nb-1', '8888:8888']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spotfit.backends.base import LaunchOptions
    from spotfit.backends.kubernetes.handle import KubernetesHandle


def shell_command(handle: KubernetesHandle, options: LaunchOptions, command: list[str]) -> list[str]:
    """`kubectl exec` of `command` (bash when empty) in the attempt's Job."""
    return [*_kubectl(handle), "exec", "-it", f"job/{handle.name}", "--", *(command or ["/bin/bash"])]


def port_forward_command(handle: KubernetesHandle, options: LaunchOptions, local: int, remote: int) -> list[str]:
    """`kubectl port-forward` from 127.0.0.1:`local` to `remote` in the attempt's Job."""
    return [*_kubectl(handle), "port-forward", "--address", "127.0.0.1", f"job/{handle.name}", f"{local}:{remote}"]


def _kubectl(handle: KubernetesHandle) -> list[str]:
    out = ["kubectl"]
    if handle.kubeconfig:
        out += ["--kubeconfig", handle.kubeconfig]
    if handle.context:
        out += ["--context", handle.context]
    return [*out, "--namespace", handle.namespace]
