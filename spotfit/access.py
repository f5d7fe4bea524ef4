"""Reaching a running attempt: a shell or command (`spotfit ssh`) and a forwarded port (`spotfit port-forward`).

Pure builders: from the attempt's backend handle (and, for a local attempt, its folder) to the
exact command that reaches it; nothing opens a port to the world:

- local: the attempt runs here; a shell or command starts in its folder, and a port is relayed
  from 127.0.0.1:LOCAL to 127.0.0.1:REMOTE (nothing to relay when they are equal);
- aws: an SSM session (`aws ssm start-session`, port forwarding with
  `AWS-StartPortForwardingSession`); with `aws.key_name`, SSH with the job's key through SSM's
  `AWS-StartSSHSession` proxy, so that no inbound port is needed either;
- kubernetes: `kubectl exec` and `kubectl port-forward` on the attempt's Job.

>>> from spotfit.backends.kubernetes.handle import KubernetesHandle
>>> h = KubernetesHandle(namespace="ml", name="nb-1", kind="Job", job="nb", attempt=1, job_url="file:///s")
>>> port_forward_command("kubernetes", h, {}, 8888, 8888)
['kubectl', '--namespace', 'ml', 'port-forward', '--address', '127.0.0.1', 'job/nb-1', '8888:8888']
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from spotfit.errors import UsageError

AWS_USER = "ubuntu"  # the login of the Deep Learning AMIs spotfit launches by default


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


def shell_command(backend: str, handle: Any, options: dict, command: list[str]) -> list[str]:
    """The command that runs `command` (a login shell when empty) on the attempt's machine."""
    if backend == "local":
        return command or [os.environ.get("SHELL") or "/bin/sh"]
    if backend == "aws":
        instance, region = _instance(handle)
        if options.get("key_name"):
            return [*_ssh(instance, region, options["key_name"]), "-t", f"{AWS_USER}@{instance}", *command]
        base = ["aws", "ssm", "start-session", "--region", region, "--target", instance]
        if not command:
            return base
        return [*base, "--document-name", "AWS-StartInteractiveCommand",
                "--parameters", json.dumps({"command": [" ".join(command)]})]
    if backend == "kubernetes":
        return [*_kubectl(handle), "exec", "-it", f"job/{handle.name}", "--", *(command or ["/bin/bash"])]
    raise UsageError(f"Invalid backend {backend!r}: expected local, aws or kubernetes.")


def port_forward_command(backend: str, handle: Any, options: dict, local: int, remote: int) -> list[str] | None:
    """The command that carries 127.0.0.1:`local` here to `remote` on the attempt's machine.

    None for a local attempt: spotfit relays the port itself (`relay`).
    """
    if backend == "local":
        return None
    if backend == "aws":
        instance, region = _instance(handle)
        if options.get("key_name"):
            return [*_ssh(instance, region, options["key_name"]), "-N",
                    "-L", f"127.0.0.1:{local}:127.0.0.1:{remote}", f"{AWS_USER}@{instance}"]
        return ["aws", "ssm", "start-session", "--region", region, "--target", instance,
                "--document-name", "AWS-StartPortForwardingSession",
                "--parameters", json.dumps({"portNumber": [str(remote)], "localPortNumber": [str(local)]})]
    if backend == "kubernetes":
        return [*_kubectl(handle), "port-forward", "--address", "127.0.0.1", f"job/{handle.name}", f"{local}:{remote}"]
    raise UsageError(f"Invalid backend {backend!r}: expected local, aws or kubernetes.")


def _instance(handle: Any) -> tuple[str, str]:
    if not handle.instances:
        raise UsageError(f"Attempt {handle.attempt} of job {handle.job} has no instance yet.",
                         hint="Wait until `spotfit status` says it runs.")
    return handle.instances[0], handle.region  # the chief


def _ssh(instance: str, region: str, key_name: str) -> list[str]:
    """SSH with the job's key pair, tunnelled through SSM: no inbound port on the instance."""
    proxy = (f"aws ssm start-session --region {region} --target %h --document-name AWS-StartSSHSession "
             "--parameters portNumber=%p")
    return ["ssh", "-i", os.path.expanduser(f"~/.ssh/{key_name}.pem"), "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"ProxyCommand={proxy}"]


def _kubectl(handle: Any) -> list[str]:
    out = ["kubectl"]
    if handle.kubeconfig:
        out += ["--kubeconfig", handle.kubeconfig]
    if handle.context:
        out += ["--context", handle.context]
    return [*out, "--namespace", handle.namespace]
