"""The backend contract: launch an attempt somewhere, watch it, signal it, stop it.

A backend knows nothing about policies, checkpoints or the ledger: the controller decides,
the backend carries out. What a backend remembers about a launched attempt is its *handle*, a
frozen dataclass of the backend's own (`LocalHandle`, `AwsHandle`); the controller stores it
as `handle.to_json()` text in the attempts table and reads it back with `load_handle`, so that
a restarted controller can adopt the attempts of the one that died (`spotfit resume`). One
that died inside `launch`, before it stored the handle, is covered by `find`: the backend
recognizes what it launched by the request alone (a process's command line, EC2 tags).

A backend may also define `preflight(spec) -> list[str]`: `spotfit run` calls it with the job
spec before it records the job, so that what cannot work (no kubeconfig) is one `UsageError`,
and records the notes it returns (what it chose instead) as `backend_note` events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from spotfit.states import Market


@dataclass
class LaunchRequest:
    """One attempt to start: the runtime reads everything else from `job_url`."""

    job_id: str
    attempt: int
    job_url: str
    zone: str | None
    market: Market
    workers: int = 1
    env: dict[str, str] = field(default_factory=dict)
    log_key: str = ""
    accelerator: str = "V100"  # per machine, as in the spec's `resources`
    accelerator_count: int = 1
    options: dict[str, Any] = field(default_factory=dict)  # the spec's section of this backend (`aws:`)


@dataclass
class AttemptStatus:
    """What a backend can tell about a launched attempt."""

    running: bool
    exit_code: int | None = None  # None while running, or when the exit went unobserved
    signal: int | None = None  # the signal that ended it, if any
    disrupted: bool = False  # the platform said it took the machine away (Kubernetes' DisruptionTarget)
    unscheduled: bool = False  # running, but no machine was found for it yet (Kubernetes: pods Pending, no node)


class Handle(Protocol):
    """What a backend remembers about one launched attempt: enough to watch and stop it anywhere."""

    def to_json(self) -> str:
        """The text the attempts table stores; the backend's `load_handle` reads it back."""


H = TypeVar("H", bound=Handle)


@runtime_checkable
class Backend(Protocol[H]):
    """Launch, watch, signal and stop attempts; `H` is the backend's own handle type."""

    name: str

    def launch(self, request: LaunchRequest) -> H:
        """Start the attempt; return its handle. Raise `NoCapacityError` when there is none."""

    def load_handle(self, text: str) -> H:
        """The handle whose `to_json()` is `text`."""

    def find(self, request: LaunchRequest) -> H | None:
        """The handle of what `launch(request)` started, looked up without one; None if nothing.

        A controller that dies inside `launch` leaves the attempt without a stored handle; its
        successor asks here before it calls the attempt killed. What is found may have ended.
        """

    def status(self, handle: H) -> AttemptStatus:
        """Whether the attempt still runs and, once it ended, how."""

    def preempt(self, handle: H, notice_s: float) -> None:
        """Deliver a preemption: SIGTERM now, SIGKILL after `notice_s` (0: SIGKILL at once)."""

    def stop(self, handle: H, grace_s: float = 10.0) -> None:
        """Stop the attempt and release its resources (idempotent)."""


_BACKENDS = {
    "local": "spotfit.backends.local:LocalBackend",
    "aws": "spotfit.backends.aws.backend:AwsBackend",
    "kubernetes": "spotfit.backends.kubernetes.backend:KubernetesBackend",
}


def registered_backends() -> list[str]:
    """Names `make_backend` knows, sorted."""
    return sorted(_BACKENDS)


def backend_options(spec: Any) -> dict[str, Any]:
    """The spec's section of its backend (`aws:`, `kubernetes:`) as a dict; {} for a backend without one.

    The `aws:` section carries the job's resolved `environment` (what its instances install); both
    cloud sections carry the `notebook` extra in `runtime_extras` for a notebook job.
    """
    if spec.backend == "aws":
        return spec.aws_options()
    if spec.backend == "kubernetes":
        return spec.kubernetes_options()
    section = getattr(spec, spec.backend, None)
    return section.model_dump() if section is not None else {}


def make_backend(name: str, **options) -> Backend:
    """The backend registered as `name`."""
    from spotfit.errors import UsageError

    if name not in _BACKENDS:
        raise UsageError(
            f"Unknown backend {name!r}: expected one of {', '.join(sorted(_BACKENDS))}.",
            hint="Set `backend:` to local, aws or kubernetes in the job spec.",
        )
    module, cls = _BACKENDS[name].split(":")
    import importlib

    return getattr(importlib.import_module(module), cls)(**options)
