"""Which machine image to boot: a Deep Learning AMI, found by SSM parameter or by name.

`aws.ami` in the job spec chooses, in one of three forms:

- `ami-0123456789abcdef0`: that image, as is;
- `ssm:/path/to/parameter`: the image id an SSM parameter holds (AWS publishes the latest
  Deep Learning AMIs this way);
- `name:PATTERN` (optionally `name:OWNER/PATTERN`): the newest image whose name matches.

Without `aws.ami`, spotfit reads `DEFAULT_SSM_PARAMETER` and, if the region does not have it,
falls back to the newest image named like `DEFAULT_NAME` owned by Amazon.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from spotfit.errors import BackendError, UsageError

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Ec2Client, SsmClient

DEFAULT_SSM_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
)
DEFAULT_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*"


def resolve_ami(ec2: Ec2Client, ssm: SsmClient, choice: str | None = None) -> str:
    """The image id for `choice` (see the module doc); raises with a hint when none is found."""
    if choice is None:
        found = _from_ssm(ssm, DEFAULT_SSM_PARAMETER)
        return found or _by_name(ec2, "amazon", DEFAULT_NAME)
    if choice.startswith("ami-"):
        return choice
    if choice.startswith("ssm:"):
        found = _from_ssm(ssm, choice[4:])
        if found is None:
            raise BackendError(f"SSM parameter {choice[4:]!r} (from `aws.ami`) does not exist in this region.",
                               hint="Check the parameter name, or set `aws.ami: ami-...` directly.")
        return found
    if choice.startswith("name:"):
        owner, _, pattern = choice[5:].rpartition("/") if "/" in choice[5:] else ("amazon", "", choice[5:])
        return _by_name(ec2, owner or "amazon", pattern)
    raise UsageError(f"Invalid `aws.ami`: received {choice!r}, expected `ami-...`, `ssm:/parameter` "
                     "or `name:PATTERN`.", hint="Example: `aws.ami: ssm:" + DEFAULT_SSM_PARAMETER + "`.")


def _from_ssm(ssm: SsmClient, name: str) -> str | None:
    try:
        return cast(str, ssm.get_parameter(Name=name)["Parameter"]["Value"])
    except ssm.exceptions.ParameterNotFound:
        return None


def _by_name(ec2: Ec2Client, owner: str, pattern: str) -> str:
    images = ec2.describe_images(Owners=[owner], Filters=[
        {"Name": "name", "Values": [pattern]}, {"Name": "state", "Values": ["available"]},
    ])["Images"]
    if not images:
        raise BackendError(f"No machine image named like {pattern!r} owned by {owner!r} in this region.",
                           hint="Set `aws.ami` to an image id, an `ssm:` parameter or a `name:` pattern.")
    return cast(str, max(images, key=lambda im: im.get("CreationDate", ""))["ImageId"])
