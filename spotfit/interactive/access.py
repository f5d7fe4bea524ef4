"""Reaching a running attempt: a shell or command (`spotfit ssh`) and a forwarded port (`spotfit port-forward`).

Pure builders: from the attempt's backend handle (and, for a local attempt, its folder) to the
exact command that reaches it; nothing opens a port to the world. Each backend builds its own
commands (a `Reachable` backend; `backends/*/access.py`):

- local: the attempt runs here; a shell or command starts in its folder, and a port is relayed
  from 127.0.0.1:LOCAL to 127.0.0.1:REMOTE (nothing to relay when they are equal);
- aws: an SSM session (`aws ssm start-session`, port forwarding with
  `AWS-StartPortForwardingSession`); with `aws.key_name`, SSH with the job's key through SSM's
  `AWS-StartSSHSession` proxy, so that no inbound port is needed either;
- kubernetes: `kubectl exec` and `kubectl port-forward` on the attempt's Job.

>>> from spotfit.backends.kubernetes.handle import KubernetesHandle
>>> h = KubernetesHandle(namespace="ml", name="nb-1", kind="Job", job="nb", attempt=1, job_url="file:///s")
>>> from spotfit.backends.base import LaunchOptions
>>> port_forward_command("kubernetes", h, LaunchOptions(), 8888, 8888)
['kubectl', '--namespace', 'ml', 'port-forward', '--address', '127.0.0.1', 'job/nb-1', '8888:8888']
"""

from __future__ import annotations

import re
from typing import Any

from spotfit.backends.base import LaunchOptions, Reachable, make_backend
from spotfit.core.registry import registered_backends
from spotfit.errors import UsageError


def parse_ports(text: str) -> tuple[int, int]:
    """`"8888"` or `"9000:8888"` -> (local, remote); one clear error otherwise.

    >>> parse_ports("6006"), parse_ports("9000:8888")
    ((6006, 6006), (9000, 8888))
    """
    match = re.fullmatch(r"(\d{1,5})(?::(\d{1,5}))?", text.strip())
    ports = (int(match.group(1)), int(match.group(2) or match.group(1))) if match else None
    if ports is None or not all(1 <= p <= 65_535 for p in ports):
        raise UsageError(f"Invalid ports: received {text[:40]!r}, expected LOCAL:REMOTE or PORT, each 1-65535.",
                         hint="Example: `spotfit port-forward JOB 6006` (TensorBoard) or `... 9000:8888`.")
    return ports


def shell_command(backend: str, handle: Any, options: LaunchOptions, command: list[str]) -> list[str]:
    """The command that runs `command` (a login shell when empty) on the attempt's machine."""
    return _reachable(backend).shell_command(handle, options, command)


def port_forward_command(backend: str, handle: Any, options: LaunchOptions, local: int,
                         remote: int) -> list[str] | None:
    """The command that carries 127.0.0.1:`local` here to `remote` on the attempt's machine.

    None for a local attempt: spotfit relays the port itself (`relay`).
    """
    return _reachable(backend).port_forward_command(handle, options, local, remote)


def _reachable(name: str) -> Reachable:
    backend = make_backend(name) if name in registered_backends() else None
    if not isinstance(backend, Reachable):
        raise UsageError(f"Invalid backend {name!r}: expected one of {', '.join(registered_backends())}, whose "
                         "attempts can be reached.")
    return backend
