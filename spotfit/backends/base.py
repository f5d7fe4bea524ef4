"""The backend contract: launch an attempt somewhere, watch it, signal it, stop it.

A backend knows nothing about policies, checkpoints or the ledger: the controller decides,
the backend carries out. What a backend remembers about a launched attempt is its *handle*, a
frozen dataclass of the backend's own (`LocalHandle`, `AwsHandle`); the controller stores it
as `handle.to_json()` text in the attempts table and reads it back with `load_handle`, so that
a restarted controller can adopt the attempts of the one that died (`spotfit resume`). One
that died inside `launch`, before it stored the handle, is covered by `find`: the backend
recognizes what it launched by the request alone (a process's command line, EC2 tags).

Optional abilities are declared, never probed: a backend that can do more implements one of the
small runtime-checkable protocols below, and callers ask `isinstance(backend, Preflight)`:

- `Preflight`: `spotfit run` calls `preflight(spec)` before it records the job, so that what
  cannot work (no kubeconfig) is one `UsageError`, and records the notes it returns (what it
  chose instead) as `backend_note` events;
- `LiveMarketSource`: live spot prices for a job without a replayed trace;
- `SecretKeeper`: the spec's `secrets:` stored at submit and deleted when the job ends;
- `Reachable`: the commands that reach a running attempt (`spotfit ssh`, `spotfit port-forward`);
- `DryRunner`: the exact cloud requests of a job's first attempt (`spotfit run --dry-run`).

What the code outside `backends/` needs to know about a backend without an instance (whether its
attempts run on this machine, its spec section as launch options, its timeouts) are the class
attributes and static hooks of `BackendTraits`, which each backend class inherits and overrides.
The one registry (`spotfit/core/registry.py`, which imports nothing, so the planner reads it too) maps a
backend's name to its class, imported lazily by `backend_class` (a cloud SDK loads only when its
backend is used): adding a backend is a folder under `backends/` and one line there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeAlias, TypedDict, TypeVar, cast, runtime_checkable

from spotfit.core.registry import BACKENDS, load, registered_backends
from spotfit.state.states import Market

if TYPE_CHECKING:
    from spotfit.backends.environment import EnvironmentOptions
    from spotfit.market.live import LiveMarket
    from spotfit.market.policies.base import Decision
    from spotfit.spec.base import BackendSection
    from spotfit.spec.job import JobSpec
    from spotfit.state.db import StateDB
    from spotfit.stores.base import ObjectStore

S = TypeVar("S", bound="BackendSection")


@dataclass(frozen=True)
class DataOptions:
    """The spec's `data:` as a cloud machine needs it: its size (a disk), where the dataset comes from, how it
    is filled (`workers`) and read (`copy` or `mount`); a job without `data:` has the defaults."""

    size_gib: float | None = None
    volume: str = "root"
    source: str | None = None
    workers: int = 16
    mode: str = "copy"

    @classmethod
    def of(cls, spec: JobSpec) -> DataOptions:
        data = spec.data
        if data is None:
            return cls()
        return cls(size_gib=data.size_gib, volume=data.volume, source=data.source, workers=data.workers,
                   mode=data.mode)


@dataclass(frozen=True)
class LaunchOptions:
    """What a backend launches with besides the request: its own section of the spec (`aws:`, `gcp:`,
    `kubernetes:`; None for a backend without one) and what else of the spec its machines need. Made by
    `BackendTraits.options`; a backend reads its section with `section_as(Aws)`.

    >>> LaunchOptions().data.mode, LaunchOptions().runtime_extras
    ('copy', ())
    """

    section: BackendSection | None = None
    runtime_extras: tuple[str, ...] = ()  # the section's, with the notebook's extra for a notebook job
    runtime_pip: str | None = None  # the section's `runtime_pip`: a published spotfit installed, not this wheel
    data: DataOptions = field(default_factory=DataOptions)
    environment: EnvironmentOptions | None = None  # what a cloud instance installs (`environment_options`)
    has_secrets: bool = False  # the job has `secrets:` or is a notebook (gcp: the VM reads Secret Manager)
    notebook_token: bool = False  # a notebook job: its token goes to the attempt (kubernetes)

    def section_as(self, kind: type[S]) -> S:
        """The backend's own section; the section's defaults where the launch carries none (a test's request)."""
        return self.section if isinstance(self.section, kind) else kind()
Report: TypeAlias = "dict[str, object]"
"""A JSON-able report (`market record`, `--dry-run`): its reader prints it or dumps it."""


class LeftoverReport(TypedDict, total=False):
    """What `LeftoverCollector.collect_leftovers` found (and removed): `spotfit gc --json` merges one per backend."""

    dry_run: bool
    kept_jobs: list[str]
    project: str  # gcp: the project searched
    regions: list[dict[str, object]]  # per region or zone: {region, found, count, ...}
    secrets: list[dict[str, object]]  # per ended job's secret: {job, ...}
    secret_store: dict[str, str]  # where the secrets were looked for: {name, what, item} (SSM, Secret Manager)


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
    options: LaunchOptions = field(default_factory=LaunchOptions)  # the spec's, for this backend
    decision: Decision | None = None  # the policy's decision this launch carries out (None: a recovery's find)


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
H_in = TypeVar("H_in", bound=Handle, contravariant=True)  # an ability that only takes the backend's handles


@runtime_checkable
class Backend(Protocol[H]):
    """Launch, watch, signal and stop attempts; `H` is the backend's own handle type."""

    name: str
    runs_here: ClassVar[bool]  # see BackendTraits

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


class BackendTraits:
    """What a backend class tells without an instance; the defaults fit a backend with no spec section.

    >>> BackendTraits.options(object()) == LaunchOptions(), BackendTraits.boot_timeout_s(object())
    (True, None)
    """

    #: Attempts run as processes on this machine: the secrets pass through the controller's environment,
    #: a port needs no forwarding, and attempts are billed at a replayed trace's prices, not a cloud's.
    runs_here: ClassVar[bool] = False
    #: The values of `data.volume` the backend can carry out; a spec asking for another is refused at submit.
    data_volumes: ClassVar[tuple[str, ...]] = ("root",)

    @staticmethod
    def options(spec: JobSpec) -> LaunchOptions:
        """The spec's section of this backend as the launch options (`LaunchRequest.options`)."""
        return LaunchOptions()

    @staticmethod
    def boot_timeout_s(spec: JobSpec) -> float | None:
        """Wall seconds after which an attempt with no runtime progress failed to boot; None: no limit."""
        return None

    @staticmethod
    def pending_timeout_s(spec: JobSpec) -> float | None:
        """Wall seconds after which an attempt still waiting for a machine ends no_capacity; None: no limit."""
        return None


@runtime_checkable
class Preflight(Protocol):
    """A backend that checks a job spec before `spotfit run` records the job."""

    def preflight(self, spec: JobSpec) -> list[str]:
        """Raise `UsageError` for what cannot work; return notes on what was chosen instead."""


@runtime_checkable
class LiveMarketSource(Protocol):
    """A backend that reads live spot prices (a `LiveMarket`) for a job without a replayed trace."""

    def live_market(self, request: LaunchRequest, zones: list[str]) -> LiveMarket | None:
        """The live market of the request's instance type in `zones`, or None when none is published."""


@dataclass(frozen=True)
class NodePrice:
    """One node's price per hour and where it came from (`usd_per_h` None: no price known)."""

    node: str
    instance_type: str | None
    market: str  # "spot" or "on_demand"
    usd_per_h: float | None
    source: str | None  # "aws spot price history", "catalog", "kubernetes.price_usd_per_h", or None
    on_demand_usd_per_h: float | None = None  # the catalog's, for the ledger's all-on-demand line
    zone: str | None = None
    region: str | None = None
    live: bool = False  # its cloud's live price is read (again by `reprice`), whatever `source` says now
    note: str | None = None  # why a live price was not used

    def describe(self) -> str:
        """One line for the `node_price` event."""
        what = f"node {self.node} ({self.instance_type or 'no instance-type label'}, {self.market})"
        if self.usd_per_h is None:
            return (f"{what}: no price (not in the catalog); set `kubernetes.price_usd_per_h` to bill it, "
                    "the attempt counts $0 until then")
        return f"{what}: ${self.usd_per_h:.4g}/h from {self.source}" + (f" ({self.note})" if self.note else "")


@runtime_checkable
class NodePricer(Protocol[H_in]):
    """A backend whose attempts run on nodes it can price (Kubernetes: a node's instance-type and
    capacity-type labels), so that an attempt without a market is still billed."""

    def node_prices(self, handle: H_in, launched: str, spec: JobSpec) -> list[NodePrice]:
        """The $/h of each node the attempt's pods run on (a Kubernetes node's price: `kubernetes/nodes.py`), its own
        section of the job `spec` saying whether to read live prices and the price of a node the catalog
        does not know."""

    def reprice(self, prices: list[NodePrice], spec: JobSpec) -> list[NodePrice]:
        """The same nodes priced again now (a live price may have moved; a catalog price does not)."""


@runtime_checkable
class SecretKeeper(Protocol):
    """A backend that stores the job's `secrets:` values where its attempts read them."""

    def put_job_secrets(self, job_id: str, values: dict[str, str], spec: JobSpec, store: ObjectStore) -> None:
        """At submit: store the values (and, in the job's store, where to find them: names only)."""

    def delete_job_secrets(self, job_id: str, spec: JobSpec) -> None:
        """The job ended for good: delete what `put_job_secrets` stored."""

    def job_secrets_region(self, spec: JobSpec) -> str:
        """Where the job's secrets live (`spotfit gc` deletes those left behind)."""


@runtime_checkable
class LeftoverCollector(Protocol):
    """A backend that can leave resources behind in a cloud, which `spotfit gc` finds by tag and removes."""

    def collect_leftovers(self, places: list[str] | None, keep: set[str], job: str | None, dry_run: bool,
                          ended_secrets: dict[str, str], keep_sources: set[str] | None) -> LeftoverReport:
        """Find (and unless `dry_run`, remove) the leftovers in `places` (its regions; None: its default)
        of the jobs not in `keep` (`job`'s only), the secrets of `ended_secrets` ({job id: where
        `job_secrets_region` said}) and the data snapshots none of whose sources is in `keep_sources` (None: no
        snapshot is touched); one JSON-able report. Bad `places` are a `UsageError` before any call."""

    def owns_place(self, place: str) -> bool:
        """Whether `place` (a `--region` of `spotfit gc`) names one of this cloud's regions or zones: a plain
        `spotfit gc --region X` cleans each backend that owns one of its places."""


@runtime_checkable
class MarketRecorder(Protocol):
    """A backend whose cloud publishes spot price history, which `spotfit market record` appends to a trace."""

    def record_market(self, region: str, instance_type: str, path: str, zones: list[str] | None, hours: float,
                      gap_s: int, state: StateDB) -> Report:
        """Append `instance_type`'s history in `region` (and the outages `state`, the state DB, saw) to `path`."""

    def owns_place(self, place: str) -> bool:
        """Whether `region` names one of this cloud's regions: `market record` without `--cloud` picks that cloud."""


@runtime_checkable
class Reachable(Protocol[H_in]):
    """A backend whose running attempts a user can reach (`spotfit ssh`, `spotfit port-forward`)."""

    def shell_command(self, handle: H_in, options: LaunchOptions, command: list[str]) -> list[str]:
        """The command that runs `command` (a login shell when empty) on the attempt's machine."""

    def port_forward_command(self, handle: H_in, options: LaunchOptions, local: int,
                             remote: int) -> list[str] | None:
        """The command that carries 127.0.0.1:`local` here to `remote` there; None: spotfit relays it itself."""


@runtime_checkable
class DryRunner(Protocol):
    """A backend that sends cloud requests, and can print them instead (`spotfit run --dry-run`)."""

    def dry_run(self, path: str) -> Report:
        """The exact requests of attempt 1 of the job spec at `path`; nothing is sent or recorded."""


_BACKENDS = BACKENDS  # the one registry (spotfit/core/registry.py)


def backend_options(spec: JobSpec) -> LaunchOptions:
    """The spec's section of its backend (`aws:`, `kubernetes:`) as a dict; {} for a backend without one.

    The `aws:` section carries the job's resolved `environment` (what its instances install); both
    cloud sections carry the `notebook` extra in `runtime_extras` for a notebook job.
    """
    return backend_class(spec.backend).options(spec)


def backend_class(name: str) -> type[BackendTraits]:
    """The class registered as `name`, imported on first use; `UsageError` for a name not registered."""
    from spotfit.errors import UsageError

    if name not in _BACKENDS:
        raise UsageError(
            f"Unknown backend {name!r}: expected one of {', '.join(sorted(_BACKENDS))}.",
            hint=f"Set `backend:` to {', '.join(sorted(_BACKENDS))} in the job spec.",
        )
    return cast(type[BackendTraits], load(_BACKENDS[name].backend))


def able_backend(name: str | None, ability: type, what: str, flag: str = "--backend", otherwise: str = "") -> str:
    """`name`, checked to be a backend with `ability` (a protocol above); by default the one that has it.

    `what` says what the ability does, for the error (`UsageError`) when `name` lacks it, or is
    None while several backends have it; `otherwise`, the other fix its hint offers.
    """
    from spotfit.errors import UsageError

    names = [n for n in registered_backends() if issubclass(backend_class(n), ability)]
    if name is None and len(names) == 1:
        return names[0]
    if name is None or name not in names:
        received = "none" if name is None else repr(name)
        raise UsageError(f"Invalid {flag}: received {received}, expected {' or '.join(names)} (the backends that "
                         f"{what}).", hint=f"Pass {flag} {names[0]}{f', or {otherwise}' if otherwise else ''}.")
    return name


def make_backend(name: str, **options: object) -> Backend[Handle]:
    """The backend registered as `name`."""
    return backend_class(name)(**options)  # type: ignore[return-value]
