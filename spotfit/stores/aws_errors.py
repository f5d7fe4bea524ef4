"""AWS API errors told apart without importing botocore at import time: its `ClientError`, its code, its message.

The S3 store and the aws backend both ask these (the backend re-exports them from
`spotfit.backends.aws.client`), so that the stores need nothing from the backends.

Example:

>>> error_code(ValueError("not from AWS")), is_client_error(ValueError("no"))
('', False)
"""

from __future__ import annotations


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
