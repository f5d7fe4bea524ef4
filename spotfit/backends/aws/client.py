"""The one place that imports boto3 and knows its exception classes (lazily, with a hint).

Everyone else asks this module: `load_boto3()` for the SDK, `is_client_error(exc)` and
`error_code(exc)` instead of importing `botocore.exceptions.ClientError` and digging through
`exc.response`, and `sdk_failure(exc)` for a one-line account of any error of the SDK (no
endpoint, no credentials, an API error).

Example:

>>> error_code(ValueError("not from AWS"))
''
>>> sdk_failure(ValueError("not from AWS")) is None
True
"""

from __future__ import annotations

from types import ModuleType

from spotfit.errors import BackendError


def load_boto3() -> ModuleType:
    """The boto3 module, or a BackendError naming the extra to install."""
    try:
        import boto3
    except ImportError:
        raise BackendError("The aws backend needs boto3, which is not installed.",
                           hint="Install the extra: pip install 'spotfit[aws]'.") from None
    return boto3


def is_client_error(exc: BaseException) -> bool:
    """True for an error the AWS API answered with (botocore's ClientError)."""
    try:
        from botocore.exceptions import ClientError
    except ImportError:
        return False
    return isinstance(exc, ClientError)


def error_code(exc: BaseException) -> str:
    """The AWS error code of `exc` (`"InvalidInstanceID.NotFound"`), or `""` for any other error."""
    if not is_client_error(exc):
        return ""
    return str(exc.response.get("Error", {}).get("Code", ""))  # type: ignore[attr-defined]


def error_message(exc: BaseException) -> str:
    """The AWS error message of `exc`, or `""`."""
    if not is_client_error(exc):
        return ""
    return str(exc.response.get("Error", {}).get("Message", ""))  # type: ignore[attr-defined]


def sdk_failure(exc: BaseException) -> str | None:
    """`"EndpointConnectionError: Could not connect ..."` for an error of the AWS SDK; None for any other."""
    try:
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return None
    if not (isinstance(exc, BotoCoreError) or is_client_error(exc)):
        return None
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
