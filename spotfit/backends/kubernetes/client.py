"""The one place that imports the `kubernetes` client and knows its exceptions (lazily, with a hint).

Everyone else asks here: `api_client(kubeconfig, context)` for a configured client (a missing
kubeconfig or context is one clear `UsageError`, exit 2), `status_code(exc)` instead of
importing `ApiException`, and `to_dict(client, obj)` for the API's objects as plain JSON dicts
(the camelCase of the manifests), which the pure functions of this package read.

>>> status_code(ValueError("not from Kubernetes"))
0
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from spotfit.errors import BackendError, UsageError

IN_CLUSTER = "in-cluster"  # the `context` of a client configured from the pod's service account


def load_kubernetes() -> ModuleType:
    """The `kubernetes` module, or a BackendError naming the extra to install."""
    try:
        import kubernetes
    except ImportError:
        raise BackendError("The kubernetes backend needs the `kubernetes` client, which is not installed.",
                           hint="Install the extra: pip install 'spotfit[kubernetes]'.") from None
    return cast(ModuleType, kubernetes)  # the client has no type hints: mypy sees Any


def kubeconfig_path(kubeconfig: str | None) -> Path | None:
    """The kubeconfig file to read: the given one, else the first of `$KUBECONFIG`, else ~/.kube/config."""
    if kubeconfig:
        return Path(kubeconfig).expanduser()
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first).expanduser() if first else Path("~/.kube/config").expanduser()


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A configured `ApiClient`: from the kubeconfig (and context), or in-cluster inside a pod.

    Inside a pod (the controller deployed in the cluster) with no kubeconfig file and no context
    asked for, the pod's service account is used.
    """
    path = kubeconfig_path(kubeconfig)
    if (path is None or not path.is_file()) and context in (None, IN_CLUSTER) \
            and os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s = load_kubernetes()
        k8s.config.load_incluster_config()
        return k8s.client.ApiClient()
    if path is None or not path.is_file():  # said before the client's import (1-2 s of CPU) is paid
        raise UsageError(f"No kubeconfig: received {str(path)!r}, expected a kubeconfig file for the "
                         "kubernetes backend.",
                         hint="Set `kubernetes.kubeconfig:` or $KUBECONFIG to your cluster's kubeconfig "
                              "(e.g. `aws eks update-kubeconfig`, `gcloud container clusters get-credentials`).")
    k8s = load_kubernetes()
    contexts, current = k8s.config.list_kube_config_contexts(config_file=str(path))
    names = sorted(c["name"] for c in contexts or [])
    if context is not None and context not in names:
        raise UsageError(f"Invalid `kubernetes.context`: received {context!r}, expected one of the contexts "
                         f"in {path}: {', '.join(names) or 'none'}.",
                         hint="Fix `kubernetes.context:` or leave it out for the kubeconfig's current context.")
    if context is None and not current:
        raise UsageError(f"No current context in {path}: expected one of {', '.join(names) or 'none'}.",
                         hint="Set `kubernetes.context:`, or `kubectl config use-context NAME`.")
    config = k8s.client.Configuration()
    k8s.config.load_kube_config(config_file=str(path), context=context, client_configuration=config)
    return k8s.client.ApiClient(configuration=config)


def status_code(exc: BaseException) -> int:
    """The HTTP status of an error the API answered with (404, 409, ...), or 0 for any other error."""
    try:
        from kubernetes.client.exceptions import ApiException
    except ImportError:
        return 0
    return int(exc.status or 0) if isinstance(exc, ApiException) else 0


def failure(exc: BaseException) -> str | None:
    """A one-line account of an error of the client (API refusal, connection), None for any other."""
    code = status_code(exc)
    if code:
        return f"HTTP {code}: {getattr(exc, 'reason', '')}".strip()
    try:
        from urllib3.exceptions import HTTPError
    except ImportError:
        return None
    if isinstance(exc, HTTPError):
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return None


def to_dict(client: Any, obj: Any) -> dict[str, Any]:
    """An API object (a model of the client) as the JSON dict the API sent (camelCase keys)."""
    return client.sanitize_for_serialization(obj) if not isinstance(obj, dict) else obj
