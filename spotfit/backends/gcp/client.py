"""The one place that imports google-cloud-compute and google-api-core (lazily, with a hint).

Everyone else asks this module: `compute()` for the SDK module, `clients(...)` for the REST
clients the backend uses, `error_codes(exc)` for the codes of an API error (the HTTP answer's
`reason`s and a finished operation's `error.errors[].code`), and `sdk_failure(exc)` for a
one-line account of any error of the SDK (no credentials, no endpoint, an API error).

`SPOTFIT_GCP_ENDPOINT` (or the backend's `endpoint`) points the clients at another Compute
Engine API, such as the emulator of the tests on 127.0.0.1; with an endpoint and no
credentials the clients send none.

Example:

>>> error_codes(ValueError("not from Google"))
set()
>>> sdk_failure(ValueError("not from Google")) is None
True
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from spotfit.errors import BackendError, cloud_errors

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

ENDPOINT_ENV = "SPOTFIT_GCP_ENDPOINT"


def compute() -> ModuleType:
    """The `google.cloud.compute_v1` module, or a BackendError naming the extra to install."""
    try:
        from google.cloud import compute_v1
    except ImportError:
        raise BackendError("The gcp backend needs google-cloud-compute, which is not installed.",
                           hint="Install the extra: pip install 'spotfit[gcp]'.") from None
    return compute_v1


@dataclass
class Clients:
    """The REST clients of one endpoint: instances and zone operations."""

    instances: Any
    zone_operations: Any


def anonymous_credentials() -> Credentials:
    """Credentials that send none: for another endpoint (the tests' emulators), which takes no token."""
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()  # type: ignore[no-untyped-call, unused-ignore]  # google-auth: untyped __init__


def clients(endpoint: str | None = None, credentials: Credentials | None = None) -> Clients:
    """REST clients of the Compute Engine API at `endpoint` (default: Google's, or `$SPOTFIT_GCP_ENDPOINT`)."""
    compute_v1 = compute()
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
    options = {"api_endpoint": endpoint} if endpoint else None
    if endpoint and credentials is None:
        credentials = anonymous_credentials()
    kwargs = {"transport": "rest", "client_options": options, "credentials": credentials}
    return Clients(instances=compute_v1.InstancesClient(**kwargs),
                   zone_operations=compute_v1.ZoneOperationsClient(**kwargs))


def disks_client(endpoint: str | None = None, credentials: Credentials | None = None) -> Any:
    """A REST `DisksClient` of the same endpoint and credentials as `clients` (for `spotfit gc`)."""
    compute_v1 = compute()
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
    if endpoint and credentials is None:
        credentials = anonymous_credentials()
    return compute_v1.DisksClient(transport="rest", credentials=credentials,
                                  client_options={"api_endpoint": endpoint} if endpoint else None)


def _catalog_kwargs(endpoint: str | None, credentials: Credentials | None) -> dict[str, Any]:
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
    if endpoint and credentials is None:
        credentials = anonymous_credentials()
    return {"transport": "rest", "credentials": credentials,
            "client_options": {"api_endpoint": endpoint} if endpoint else None}


def region_zones(project: str, region: str, endpoint: str | None = None,
                 credentials: Credentials | None = None) -> list[str]:
    """The zones of `region` that are `UP`, as `zones.list` names them (sorted)."""
    listed = compute().ZonesClient(**_catalog_kwargs(endpoint, credentials)).list(project=project)
    return sorted(z.name for z in listed if z.region.rsplit("/", 1)[-1] == region and z.status == "UP")


def zone_offers(project: str, zone: str, machine_type: str, accelerator_type: str | None = None,
                endpoint: str | None = None, credentials: Credentials | None = None) -> bool:
    """Whether `zone` lists `machine_type` (`machineTypes.get`) and, for attached GPUs, `accelerator_type`
    (`acceleratorTypes.get`); a 404 means it does not."""
    kwargs = _catalog_kwargs(endpoint, credentials)
    try:
        compute().MachineTypesClient(**kwargs).get(project=project, zone=zone, machine_type=machine_type)
        if accelerator_type:
            compute().AcceleratorTypesClient(**kwargs).get(project=project, zone=zone,
                                                          accelerator_type=accelerator_type)
    except Exception as exc:
        if is_not_found(exc):
            return False
        raise
    return True


def instance_from_json(body: dict[str, Any]) -> Any:
    """The `compute_v1.Instance` of a resource in the API's JSON names (unknown fields are errors)."""
    import json

    return compute().Instance.from_json(json.dumps(body))


def error_codes(exc: BaseException) -> set[str]:
    """The API's codes in `exc` (`ZONE_RESOURCE_POOL_EXHAUSTED`, `alreadyExists`, ...); empty for other errors."""
    codes: set[str] = set()
    for item in getattr(exc, "errors", None) or ():
        if isinstance(item, dict):
            codes.update(str(item[k]) for k in ("reason", "code") if item.get(k))
        else:
            codes.update(str(v) for v in (getattr(item, "code", ""), getattr(item, "reason", "")) if v)
    reason = getattr(exc, "reason", None)
    if reason:
        codes.add(str(reason))
    return codes


def operation_codes(operation: Any) -> set[str]:
    """The error codes of a finished operation (`Operation.error.errors[].code`)."""
    error = getattr(operation, "error", None)
    return {str(e.code) for e in getattr(error, "errors", None) or () if e.code}


def is_done(operation: Any) -> bool:
    """Whether a zone operation finished (its `status` is the enum `DONE`)."""
    status = getattr(operation, "status", None)
    return getattr(status, "name", status) == "DONE"


def is_not_found(exc: BaseException) -> bool:
    try:
        from google.api_core.exceptions import NotFound
    except ImportError:
        return False
    return isinstance(exc, NotFound)


def is_api_error(exc: BaseException) -> bool:
    try:
        from google.api_core.exceptions import GoogleAPICallError
    except ImportError:
        return False
    return isinstance(exc, GoogleAPICallError)


def sdk_failure(exc: BaseException) -> str | None:
    """`"NotFound: 404 ..."` for an error of the Google SDK (or of its HTTP transport); None for any other."""
    try:
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError
        from requests.exceptions import RequestException
    except ImportError:
        return None
    if not isinstance(exc, GoogleAPIError | GoogleAuthError | RequestException):
        return None
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def sdk_errors(what: str, hint: str) -> AbstractContextManager[None]:
    """Inside: a Google SDK error becomes one `BackendError` line, `{what}: {sdk_failure}` (`errors.cloud_errors`)."""
    return cloud_errors(sdk_failure, what, hint)
