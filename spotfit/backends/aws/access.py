"""Reaching a running EC2 attempt: an SSM session, or SSH with the job's key tunnelled through SSM.

`aws ssm start-session` (port forwarding with `AWS-StartPortForwardingSession`); with
`aws.key_name`, SSH with the job's key through SSM's `AWS-StartSSHSession` proxy, so that no
inbound port is needed either. Pure builders: from the attempt's handle to the exact command.

>>> from spotfit.backends.aws.handle import AwsHandle
>>> h = AwsHandle(region="us-east-1", job="j", attempt=1, job_url="file:///s", instances=("i-1",))
>>> from spotfit.backends.base import LaunchOptions
>>> shell_command(h, LaunchOptions(), [])
['aws', 'ssm', 'start-session', '--region', 'us-east-1', '--target', 'i-1']
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from spotfit.backends.aws.spec import Aws
from spotfit.errors import UsageError

if TYPE_CHECKING:
    from spotfit.backends.aws.handle import AwsHandle
    from spotfit.backends.base import LaunchOptions

AWS_USER = "ubuntu"  # the login of the Deep Learning AMIs spotfit launches by default


def shell_command(handle: AwsHandle, options: LaunchOptions, command: list[str]) -> list[str]:
    """The command that runs `command` (a login shell when empty) on the attempt's chief instance."""
    instance, region = _instance(handle)
    if key_name := options.section_as(Aws).key_name:
        return [*_ssh(instance, region, key_name), "-t", f"{AWS_USER}@{instance}", *command]
    base = ["aws", "ssm", "start-session", "--region", region, "--target", instance]
    if not command:
        return base
    return [*base, "--document-name", "AWS-StartInteractiveCommand",
            "--parameters", json.dumps({"command": [" ".join(command)]})]


def port_forward_command(handle: AwsHandle, options: LaunchOptions, local: int, remote: int) -> list[str]:
    """The command that carries 127.0.0.1:`local` here to `remote` on the attempt's chief instance."""
    instance, region = _instance(handle)
    if key_name := options.section_as(Aws).key_name:
        return [*_ssh(instance, region, key_name), "-N",
                "-L", f"127.0.0.1:{local}:127.0.0.1:{remote}", f"{AWS_USER}@{instance}"]
    return ["aws", "ssm", "start-session", "--region", region, "--target", instance,
            "--document-name", "AWS-StartPortForwardingSession",
            "--parameters", json.dumps({"portNumber": [str(remote)], "localPortNumber": [str(local)]})]


def _instance(handle: AwsHandle) -> tuple[str, str]:
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
