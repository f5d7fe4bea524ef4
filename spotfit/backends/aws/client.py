"""The one place that imports boto3 and knows its exception classes (lazily, with a hint).

Everyone else asks this module: `load_boto3()` for the SDK, `is_client_error(exc)` and
`error_code(exc)` instead of importing `botocore.exceptions.ClientError` and digging through
`exc.response` (those live in `spotfit.stores.aws_errors`, which the S3 store uses too, and
are re-exported here), and `sdk_failure(exc)` for a one-line account of any error of the SDK
(no endpoint, no credentials, an API error).

Example:

>>> error_code(ValueError("not from AWS"))
''
>>> sdk_failure(ValueError("not from AWS")) is None
True
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any, TypeAlias, cast

from spotfit.errors import BackendError, cloud_errors
from spotfit.stores.aws_errors import error_code, error_message, is_client_error

__all__ = ["Client", "Ec2Client", "Session", "SsmClient", "error_code", "error_message", "is_client_error",
           "load_boto3", "sdk_errors", "sdk_failure"]

# boto3 has no type stubs here, so mypy knows its sessions and clients only as Any; these names say which one is meant.
Session: TypeAlias = Any
"""A `boto3.Session`."""
Client: TypeAlias = Any
"""A boto3 client of any service (`Session.client(service, region_name=...)`)."""
Ec2Client: TypeAlias = Client
"""A boto3 EC2 client."""
SsmClient: TypeAlias = Client
"""A boto3 (or botocore) SSM client."""


def load_boto3() -> ModuleType:
    """The boto3 module, or a BackendError naming the extra to install."""
    try:
        import boto3
    except ImportError:
        raise BackendError("The aws backend needs boto3, which is not installed.",
                           hint="Install the extra: pip install 'spotfit[aws]'.") from None
    return cast(ModuleType, boto3)


def sdk_failure(exc: BaseException) -> str | None:
    """`"EndpointConnectionError: Could not connect ..."` for an error of the AWS SDK; None for any other."""
    try:
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return None
    if not (isinstance(exc, BotoCoreError) or is_client_error(exc)):
        return None
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def sdk_errors(what: str, hint: str) -> AbstractContextManager[None]:
    """Inside: an AWS SDK error becomes one `BackendError` line, `{what}: {sdk_failure}` (`errors.cloud_errors`)."""
    return cloud_errors(sdk_failure, what, hint)
