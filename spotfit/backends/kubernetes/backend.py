"""The `kubernetes` backend: each attempt is a Job (one worker) or a TFJob / Indexed Job (several).

`launch` ships the script's folder and the running spotfit's wheel to the job's store (as the aws
backend does; the wheel once per content, to `<store>/cache/wheels/`), resolves the
settings (`settings`: placement from the `kubernetes.spot` profile and the policy's market,
image, install step, TFJob or Indexed Job), and creates the objects `manifests.attempt_objects`
builds, in order. A retried launch finds its objects by name (409 Conflict) instead of making
new ones; `find` looks them up the same way after a controller died inside `launch`.

`status` reads the attempt's pods (`podstatus.attempt_status`); a `DisruptionTarget` seen while
the pods terminate is remembered, since a deleted pod can vanish before the next look.
`preempt` evicts the pods with the notice as grace period: the API marks them
`DisruptionTarget`, the kubelet sends SIGTERM and, after the notice, SIGKILL — what a node
drain does to a spot node. `stop` deletes the pods (grace `grace_s`), the Job and the rest.
`node_prices` prices the nodes the attempt's pods run on (nodes.py), so that it is billed;
`reprice` reads a live-priced node's price again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from spotfit.attempt.notebook import TOKEN_ENV, read_token
from spotfit.backends.base import AttemptStatus, BackendTraits, LaunchOptions, LaunchRequest, NodePrice, Report
from spotfit.backends.data_disk import GIB, data_disk_gib
from spotfit.backends.kubernetes import access
from spotfit.backends.kubernetes import client as kc
from spotfit.backends.kubernetes import manifests as mf
from spotfit.backends.kubernetes.handle import KubernetesHandle
from spotfit.backends.kubernetes.install import DEFAULT_EXTRAS, container_script
from spotfit.backends.kubernetes.live_price import LivePrices
from spotfit.backends.kubernetes.nodes import price_node, reprice
from spotfit.backends.kubernetes.podstatus import attempt_status, disrupted, node_gone, owner_finished
from spotfit.backends.kubernetes.profiles import placement
from spotfit.backends.kubernetes.spec import DEFAULT_IMAGE, Kubernetes, kubernetes_options
from spotfit.backends.wheel import ship_wheel, shipped_wheel_url
from spotfit.errors import BackendError, UsageError

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec

_STORE_CREDENTIALS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                      "GOOGLE_APPLICATION_CREDENTIALS"}


class KubernetesBackend(BackendTraits):
    """Run attempts as Kubernetes Jobs or TFJobs."""

    name = "kubernetes"
    options = staticmethod(kubernetes_options)

    @staticmethod
    def pending_timeout_s(spec: JobSpec) -> float | None:
        return Kubernetes.of(spec).pending_timeout_s

    def __init__(self, allow_local_store: bool = False, api_client: Any = None, aws_session: Any = None):
        self.allow_local_store = allow_local_store  # tests: a file:// store the emulated pods share
        self._fixed_client = api_client
        self._live = LivePrices(aws_session)  # nodes' live prices (`kubernetes.live_prices`)
        self._clients: dict[tuple[str | None, str | None], Any] = {}
        self._lock = threading.Lock()
        self._disrupted: set[str] = set()  # attempts (object names) whose pods were seen disrupted

    # -- clients ----------------------------------------------------------------------------------

    def client(self, kubeconfig: str | None, context: str | None) -> Any:
        if self._fixed_client is not None:
            return self._fixed_client
        with self._lock:
            if (kubeconfig, context) not in self._clients:
                self._clients[kubeconfig, context] = kc.api_client(kubeconfig, context)
            return self._clients[kubeconfig, context]

    def _apis(self, handle: KubernetesHandle) -> tuple[Any, Any, Any, Any]:
        k8s = kc.load_kubernetes().client
        api = self.client(handle.kubeconfig, handle.context)
        return api, k8s.CoreV1Api(api), k8s.BatchV1Api(api), k8s.CustomObjectsApi(api)

    # -- resolving an attempt -----------------------------------------------------------------------

    def preflight(self, spec: JobSpec) -> list[str]:
        """Check a job spec before it is recorded: no store credentials in it, the `secret_env`
        variables set here, the kubeconfig and context, and for several workers the TFJob CRD.

        Bad input raises a `UsageError` (exit 2); the notes returned say what was chosen instead
        (the Indexed Job fallback).
        """
        section, workers = Kubernetes.of(spec), spec.resources.workers
        check_env(dict(spec.env), section.secret_env)
        secret_values(tuple(section.secret_env))
        self.client(section.kubeconfig, section.context)
        if workers <= 1 or (section.multi_worker or "auto") == "indexed":
            return []
        if self.multi_worker_kind(section, workers) == "tfjob":
            return []
        return [f"the cluster has no TFJob CRD ({mf.TFJOB_CRD}): the job's {workers} workers run as an Indexed "
                "Job behind a headless Service, each pod building TF_CONFIG from its index"]

    def shell_command(self, handle: KubernetesHandle, options: LaunchOptions, command: list[str]) -> list[str]:
        return access.shell_command(handle, options, command)

    def port_forward_command(self, handle: KubernetesHandle, options: LaunchOptions, local: int,
                             remote: int) -> list[str]:
        return access.port_forward_command(handle, options, local, remote)

    def dry_run(self, path: str) -> Report:
        from spotfit.backends.kubernetes.dryrun import dry_run

        return dry_run(path, self)

    def multi_worker_kind(self, section: Kubernetes, workers: int, has_tfjob: bool | None = None) -> str:
        """"tfjob" or "indexed" for `workers` > 1, by `kubernetes.multi_worker` and the cluster's CRDs."""
        multi = section.multi_worker or "auto"
        if multi == "indexed":
            return "indexed"
        has = self.has_tfjob(section) if has_tfjob is None else has_tfjob
        if multi == "tfjob" and not has:
            raise UsageError(f"Invalid `kubernetes.multi_worker`: received 'tfjob', but the cluster has no TFJob "
                             f"CRD ({mf.TFJOB_CRD}) for the job's {workers} workers.",
                             hint="Install Kubeflow's Training Operator, or set `kubernetes.multi_worker: auto` "
                                  "(an Indexed Job + headless Service when the CRD is missing).")
        return "tfjob" if has else "indexed"

    def has_tfjob(self, section: Kubernetes) -> bool:
        """Whether the cluster has Kubeflow's TFJob CRD (`tfjobs.kubeflow.org`)."""
        k8s = kc.load_kubernetes().client
        api = self.client(section.kubeconfig, section.context)
        try:
            k8s.ApiextensionsV1Api(api).read_custom_resource_definition(mf.TFJOB_CRD)
        except Exception as exc:
            if kc.status_code(exc) == 404:
                return False
            how = kc.failure(exc)
            if how is None:
                raise
            raise BackendError(f"Could not ask the cluster ({api.configuration.host}) for the TFJob CRD: {how}",
                               hint="Check that the cluster is reachable (`kubectl get crd`) and that your "
                                    "user may read CustomResourceDefinitions.") from exc
        return True

    def settings(self, request: LaunchRequest, tfjob: bool | None = None) -> mf.AttemptSettings:
        """The manifests' settings for `request`; `tfjob=None` asks the cluster (several workers)."""
        opts, kube = request.options, request.options.section_as(Kubernetes)
        check_env(request.env, kube.secret_env or [])
        multi = self.multi_worker_kind(kube, request.workers, tfjob) if request.workers > 1 else "indexed"
        gpus = 0 if request.accelerator.upper() == "CPU" else request.accelerator_count
        return mf.AttemptSettings(
            job_id=request.job_id, attempt=request.attempt, job_url=request.job_url,
            namespace=kube.namespace or "default", image=kube.image or DEFAULT_IMAGE,
            script=container_script(wheel_url(request), opts.runtime_extras or DEFAULT_EXTRAS, opts.runtime_pip),
            workers=max(request.workers, 1), gpus=gpus,
            placement=placement(kube.spot, request.market, kube),
            grace_s=int(kube.grace_s or 120),
            service_account=kube.service_account, env=dict(request.env),
            # A notebook's token goes into the attempt's Secret beside `secret_env` (never into the store).
            secret_env=tuple(kube.secret_env or ()) + ((TOKEN_ENV,) if opts.notebook_token else ()),
            env_from_secrets=tuple(kube.env_from_secrets or ()),
            worker_port=int(kube.worker_port or 2222), multi_worker=multi,
            data_volume_gib=data_disk_gib(int(opts.data.size_gib * GIB)) if opts.data.size_gib else None,
            fuse=opts.data.mode == "mount",
            data_storage_class=kube.data_storage_class)

    # -- the Backend protocol -----------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> KubernetesHandle:
        from spotfit.backends import shipping  # the code and launch.json travel as they do for EC2
        from spotfit.stores import open_store

        self._check_store(request.job_url)
        s = self.settings(request)
        values = secret_values(tuple(n for n in s.secret_env if n != TOKEN_ENV))
        if TOKEN_ENV in s.secret_env:
            values[TOKEN_ENV] = read_token(request.job_id)
        shipping.ship(open_store(request.job_url), request.attempt, {}, s.workers, s.worker_port)
        if ships_wheel(request.options):
            ship_wheel(request.job_url)
        handle = self._handle(request, s)
        api, core, batch, custom = self._apis(handle)
        for obj in mf.attempt_objects(s, values):
            try:
                _create(obj, core, batch, custom)
            except Exception as exc:
                if kc.status_code(exc) == 409:  # a retried launch: made by the first try
                    continue
                raise _launch_error(exc, obj) from exc
        return handle

    def _handle(self, request: LaunchRequest, s: mf.AttemptSettings) -> KubernetesHandle:
        kube = request.options.section_as(Kubernetes)
        return KubernetesHandle(namespace=s.namespace, name=s.name, kind=s.kind, job=request.job_id,
                                attempt=request.attempt, job_url=request.job_url, workers=s.workers,
                                kubeconfig=kube.kubeconfig, context=kube.context,
                                service=s.name if s.kind == "IndexedJob" else None, secret=mf.secret_name(s))

    def load_handle(self, text: str) -> KubernetesHandle:
        return KubernetesHandle.from_json(text)

    def find(self, request: LaunchRequest) -> KubernetesHandle | None:
        """The attempt's objects, found by their name; None when its Job (TFJob) does not exist."""
        for tfjob in ((True, False) if request.workers > 1 else (False,)):
            try:
                s = self.settings(request, tfjob=tfjob)
            except UsageError:  # `multi_worker: tfjob` and the CRD asked about is gone: not this kind
                continue
            handle = self._handle(request, s)
            if self._owner(handle) is not None:
                return handle
        return None

    def status(self, handle: KubernetesHandle) -> AttemptStatus:
        pods = self._pods(handle)
        if any(disrupted(p) for p in pods):
            self._disrupted.add(handle.name)
        owner = self._owner(handle)
        status = attempt_status(pods, handle.workers, owner is not None and not owner_finished(owner))
        if status.running or status.disrupted or status.exit_code in (0, 75, 76):
            return status
        if handle.name in self._disrupted or self._node_gone(handle, pods):
            return replace(status, disrupted=True)
        return status

    def _node_gone(self, handle: KubernetesHandle, pods: list[dict[str, Any]]) -> bool:
        """Whether events about the pods or their nodes say a node went away (an unexplained end only)."""
        api, core, _, _ = self._apis(handle)
        about = [(handle.namespace, p["metadata"]["name"]) for p in pods]
        about += [("default", n) for n in {(p.get("spec") or {}).get("nodeName") for p in pods} if n]
        for namespace, name in about:
            listing = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
            if node_gone([kc.to_dict(api, e) for e in listing.items]):
                return True
        return False

    def preempt(self, handle: KubernetesHandle, notice_s: float) -> None:
        """Evict the attempt's pods with `notice_s` of grace (0: at once), as a node drain does."""
        _, core, _, _ = self._apis(handle)
        grace = max(int(notice_s), 0)
        for pod in self._pods(handle):
            name = pod["metadata"]["name"]
            body = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": name, "namespace": handle.namespace},
                    "deleteOptions": {"gracePeriodSeconds": grace}}
            _quietly(core.create_namespaced_pod_eviction, name, handle.namespace, body)

    def stop(self, handle: KubernetesHandle, grace_s: float = 10.0) -> None:
        """Delete the attempt's pods (SIGTERM, SIGKILL after `grace_s`), its Job (TFJob), Service and Secret."""
        _, core, batch, custom = self._apis(handle)
        for pod in self._pods(handle):
            _quietly(core.delete_namespaced_pod, pod["metadata"]["name"], handle.namespace,
                     grace_period_seconds=max(int(grace_s), 0))
        if handle.kind == "TFJob":
            _quietly(custom.delete_namespaced_custom_object, mf.TFJOB_GROUP, mf.TFJOB_VERSION, handle.namespace,
                     mf.TFJOB_PLURAL, handle.name, propagation_policy="Background")
        else:
            _quietly(batch.delete_namespaced_job, handle.name, handle.namespace, propagation_policy="Background")
        if handle.service:
            _quietly(core.delete_namespaced_service, handle.service, handle.namespace)
        if handle.secret:
            _quietly(core.delete_namespaced_secret, handle.secret, handle.namespace)

    def node_prices(self, handle: KubernetesHandle, launched: str, spec: JobSpec) -> list[NodePrice]:
        """The price of each node the attempt's pods run on ([] while none has a node yet): live where the
        spec asks and the node's cloud allows (live_price.py), else the catalog's, else the spec's."""
        api, core, _, _ = self._apis(handle)
        nodes = sorted({n for p in self._pods(handle) if (n := (p.get("spec") or {}).get("nodeName"))})
        docs = [kc.to_dict(api, core.read_node(node)) for node in nodes]
        section = Kubernetes.of(spec)
        return [price_node(d["metadata"]["name"], d["metadata"].get("labels") or {}, launched,
                           section.price_usd_per_h, self._live.lookup(section, d)) for d in docs]

    def reprice(self, prices: list[NodePrice], spec: JobSpec) -> list[NodePrice]:
        """The same nodes priced again now: a live price may have moved (the others stay)."""
        section = Kubernetes.of(spec)
        return [reprice(p, self._live.lookup(section)) for p in prices]

    # -- reading ------------------------------------------------------------------------------------

    def _pods(self, handle: KubernetesHandle) -> list[dict[str, Any]]:
        api, core, _, _ = self._apis(handle)
        listing = core.list_namespaced_pod(handle.namespace, label_selector=f"{mf.LABEL_NAME}={handle.name}")
        return [kc.to_dict(api, p) for p in listing.items]

    def _owner(self, handle: KubernetesHandle) -> dict[str, Any] | None:
        """The attempt's Job (TFJob) as a dict, None when it does not exist."""
        api, _, batch, custom = self._apis(handle)
        try:
            if handle.kind == "TFJob":
                owner: dict[str, Any] = custom.get_namespaced_custom_object(
                    mf.TFJOB_GROUP, mf.TFJOB_VERSION, handle.namespace, mf.TFJOB_PLURAL, handle.name)
                return owner
            return kc.to_dict(api, batch.read_namespaced_job(handle.name, handle.namespace))
        except Exception as exc:
            if kc.status_code(exc) == 404:
                return None
            raise

    def _check_store(self, job_url: str) -> None:
        if not self.allow_local_store and job_url.split("://", 1)[0] in ("file", "memory"):
            raise UsageError(f"Invalid job store for the kubernetes backend: received {job_url!r}, expected an "
                             "s3:// or gs:// URL that the pods can reach.",
                             hint="Set `checkpoint.store: s3://BUCKET/PREFIX` (or gs://) and give the pods access "
                                  "through `kubernetes.service_account` (IRSA, workload identity).")


def ships_wheel(options: LaunchOptions) -> bool:
    """Whether the pods install the running spotfit's wheel (neither `runtime_wheel` nor `runtime_pip` set)."""
    return not (options.section_as(Kubernetes).runtime_wheel or options.runtime_pip)


def wheel_url(request: LaunchRequest) -> str | None:
    """The wheel the pods install: `runtime_wheel`, else the shipped one (None with `runtime_pip`).

    The shipped wheel's URL follows from its content, so a dry run shows the URL `launch` uploads to.
    """
    if not ships_wheel(request.options):
        return request.options.section_as(Kubernetes).runtime_wheel
    return shipped_wheel_url(request.job_url)


def check_env(env: dict[str, str], secret_env: list[str]) -> None:
    """Store credentials never travel in the spec: the pods get them from the cluster."""
    bad = sorted(_STORE_CREDENTIALS & (set(env) | set(secret_env)))
    if bad:
        raise UsageError(f"Invalid `env` for the kubernetes backend: received {', '.join(bad)}; store credentials "
                         "come from the cluster, never from the spec.",
                         hint="Remove them and set `kubernetes.service_account` to an account bound to a cloud "
                              "role (EKS: IRSA; GKE: workload identity) that may use the job's bucket.")


def secret_values(names: tuple[str, ...]) -> dict[str, str]:
    """The values of `kubernetes.secret_env`, read from this (the controller's) environment."""
    missing = [n for n in names if n not in os.environ]
    if missing:
        raise UsageError(f"Invalid `kubernetes.secret_env`: {', '.join(missing)} not set in the controller's "
                         "environment, expected each name to be set there.",
                         hint="Export them before `spotfit run`, or remove them from `kubernetes.secret_env`.")
    return {n: os.environ[n] for n in names}


def _create(obj: dict[str, Any], core: Any, batch: Any, custom: Any) -> None:
    ns = obj["metadata"]["namespace"]
    kind = obj["kind"]
    if kind == "Secret":
        core.create_namespaced_secret(ns, obj)
    elif kind == "Service":
        core.create_namespaced_service(ns, obj)
    elif kind == "Job":
        batch.create_namespaced_job(ns, obj)
    else:
        custom.create_namespaced_custom_object(mf.TFJOB_GROUP, mf.TFJOB_VERSION, ns, mf.TFJOB_PLURAL, obj)


def _launch_error(exc: Exception, obj: dict[str, Any]) -> Exception:
    how = kc.failure(exc)
    if how is None:
        return exc
    return BackendError(f"The cluster refused {obj['kind']} {obj['metadata']['name']}: {how}",
                        hint="Check the namespace, the RBAC of your kubeconfig's user (docs/kubernetes.md) and "
                             "`kubectl get events`.")


def _quietly(call: Callable[..., object], *args: object, **kwargs: object) -> None:
    """Call a delete or eviction; an object already gone (404) is fine."""
    try:
        call(*args, **kwargs)
    except Exception as exc:
        if kc.status_code(exc) != 404:
            raise
