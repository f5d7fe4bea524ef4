"""The Kubernetes objects of one attempt, as plain dicts: built here, printed by `--dry-run`, sent by the backend.

- one worker: a batch/v1 Job of one pod (`restartPolicy: Never`, `backoffLimit: 0`: spotfit,
  not the Job controller, decides what to relaunch, and where);
- several workers: a Kubeflow TFJob (its operator injects `TF_CONFIG`), or an Indexed Job plus
  a headless Service, from which each pod builds `TF_CONFIG` (`pod.tf_config`);
- the attempt's Secret when `kubernetes.secret_env` names variables (passed with `envFrom`);
- with `data.size_gib`, a generic ephemeral volume for the data cache, sized by
  `data_disk.data_disk_gib` (`kubernetes.data_storage_class`), mounted at `DATA_CACHE_MOUNT`
  and named by `SPOTFIT_CACHE_DIR`;
- with `data.mode: mount`, the node's `/dev/fuse` (a `hostPath` volume) and the `SYS_ADMIN`
  capability, so that the runtime can mount the data (runtime/datamount.py); the image must
  carry rclone or mount-s3, else the runtime copies the data.

Every pod asks for `nvidia.com/gpu` (unless the accelerator is `CPU`), has
`terminationGracePeriodSeconds: kubernetes.grace_s` (the time a checkpoint needs after SIGTERM),
and carries the labels `spotfit.io/managed`, `spotfit.io/job`, `spotfit.io/attempt` and
`spotfit.io/name` (the attempt's object name, by which the backend finds its pods).

>>> s = AttemptSettings(job_id="digits-20261130-1", attempt=2, job_url="s3://b/jobs/digits-20261130-1",
...                     namespace="ml", image="tf:gpu", script="true\\n")
>>> [o["kind"] for o in attempt_objects(s)]
['Job']
>>> attempt_objects(s)[0]["spec"]["template"]["spec"]["containers"][0]["resources"]
{'limits': {'nvidia.com/gpu': 1}}
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from spotfit.backends.kubernetes.profiles import Placement

TFJOB_GROUP, TFJOB_VERSION, TFJOB_PLURAL = "kubeflow.org", "v1", "tfjobs"
TFJOB_CRD = f"{TFJOB_PLURAL}.{TFJOB_GROUP}"
LABEL_MANAGED, LABEL_JOB, LABEL_ATTEMPT, LABEL_NAME = (
    "spotfit.io/managed", "spotfit.io/job", "spotfit.io/attempt", "spotfit.io/name")
CONTAINER = "spotfit"
FINISHED_TTL_S = 86_400  # a finished attempt's objects go away after a day (the controller deletes them sooner)
DATA_VOLUME, DATA_CACHE_MOUNT = "data-cache", "/spotfit-data-cache"
FUSE_VOLUME = "fuse"
_MAX_NAME = 52  # 63 minus room for the Job controller's pod suffixes and the index


@dataclass(frozen=True)
class AttemptSettings:
    """Everything the manifests of one attempt depend on."""

    job_id: str
    attempt: int
    job_url: str
    namespace: str
    image: str
    script: str  # the container's shell script (install.container_script)
    workers: int = 1
    gpus: int = 1  # per pod; 0 for a CPU job
    placement: Placement = field(default_factory=Placement)
    grace_s: int = 120
    service_account: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()  # names; the values go into the attempt's Secret
    env_from_secrets: tuple[str, ...] = ()
    worker_port: int = 2222
    multi_worker: str = "indexed"  # "tfjob" or "indexed" (resolved: the backend looked for the CRD)
    data_volume_gib: int | None = None  # an ephemeral volume for the data cache (`data.size_gib` given)
    data_storage_class: str | None = None
    fuse: bool = False  # `data.mode: mount`: /dev/fuse and CAP_SYS_ADMIN, so the runtime can mount the data

    @property
    def name(self) -> str:
        return resource_name(self.job_id, self.attempt)

    @property
    def kind(self) -> str:
        """"Job", "IndexedJob" or "TFJob"."""
        if self.workers <= 1:
            return "Job"
        return "TFJob" if self.multi_worker == "tfjob" else "IndexedJob"


def resource_name(job_id: str, attempt: int) -> str:
    """The DNS-1123 name of an attempt's objects: `sf-<job>-<attempt>`, shortened with a hash if long.

    >>> resource_name("Digits_20261130-214352-ab12", 3)
    'sf-digits-20261130-214352-ab12-3'
    >>> len(resource_name("x" * 63, 12)) <= 52
    True
    """
    slug = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    name = f"sf-{slug}-{attempt}"
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:8]
    keep = _MAX_NAME - len(f"sf--{digest}-{attempt}")
    return f"sf-{slug[:keep].rstrip('-')}-{digest}-{attempt}"


def label_value(text: str) -> str:
    """`text` as a label value (at most 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63].strip("-_.") or "x"


def labels(s: AttemptSettings) -> dict[str, str]:
    return {LABEL_MANAGED: "true", LABEL_JOB: label_value(s.job_id), LABEL_ATTEMPT: str(s.attempt),
            LABEL_NAME: s.name}


def secret_name(s: AttemptSettings) -> str | None:
    return f"{s.name}-env" if s.secret_env else None


def _env(s: AttemptSettings) -> list[dict[str, Any]]:
    fixed = {"SPOTFIT_JOB_URL": s.job_url, "SPOTFIT_ATTEMPT": str(s.attempt), "SPOTFIT_WORKERS": str(s.workers),
             "PYTHONUNBUFFERED": "1"}
    if s.data_volume_gib:
        fixed["SPOTFIT_CACHE_DIR"] = DATA_CACHE_MOUNT
    if s.kind == "IndexedJob":
        fixed |= {"SPOTFIT_SERVICE": s.name, "SPOTFIT_WORKER_PORT": str(s.worker_port)}
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in {**s.env, **fixed}.items()]
    if s.kind == "IndexedJob":
        env.append({"name": "SPOTFIT_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
    return env


def pod_template(s: AttemptSettings) -> dict[str, Any]:
    """The pod template every worker of the attempt runs."""
    container: dict[str, Any] = {"name": CONTAINER, "image": s.image, "command": ["/bin/bash", "-c", s.script],
                       "env": _env(s)}
    env_from = [{"secretRef": {"name": n}} for n in ([secret_name(s)] if s.secret_env else [])]
    env_from += [{"secretRef": {"name": n}} for n in s.env_from_secrets]
    if env_from:
        container["envFrom"] = env_from
    if s.gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": s.gpus}}
    if s.workers > 1:
        container["ports"] = [{"name": "tf-worker", "containerPort": s.worker_port}]
    spec: dict[str, Any] = {"restartPolicy": "Never", "terminationGracePeriodSeconds": s.grace_s,
                            "containers": [container], **s.placement.pod_fields()}
    if s.service_account:
        spec["serviceAccountName"] = s.service_account
    if s.data_volume_gib:
        container["volumeMounts"] = [{"name": DATA_VOLUME, "mountPath": DATA_CACHE_MOUNT}]
        spec["volumes"] = [data_volume(s)]
    if s.fuse:
        container["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
        container.setdefault("volumeMounts", []).append({"name": FUSE_VOLUME, "mountPath": "/dev/fuse"})
        spec.setdefault("volumes", []).append({"name": FUSE_VOLUME,
                                               "hostPath": {"path": "/dev/fuse", "type": "CharDevice"}})
    if s.kind == "IndexedJob":
        spec["subdomain"] = s.name  # with the headless Service: <name>-<index>.<name>.<namespace>.svc
    return {"metadata": {"labels": labels(s)}, "spec": spec}


def data_volume(s: AttemptSettings) -> dict[str, Any]:
    """The data cache's generic ephemeral volume: a PVC made with the pod and deleted with it."""
    claim: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": f"{s.data_volume_gib}Gi"}}}
    if s.data_storage_class:
        claim["storageClassName"] = s.data_storage_class
    return {"name": DATA_VOLUME, "ephemeral": {"volumeClaimTemplate": {"metadata": {"labels": labels(s)},
                                                                       "spec": claim}}}


def _meta(s: AttemptSettings, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": s.namespace, "labels": labels(s)}


def job(s: AttemptSettings) -> dict[str, Any]:
    """The batch/v1 Job: one pod, or an Indexed Job of `workers` pods started together."""
    spec: dict[str, Any] = {"backoffLimit": 0, "ttlSecondsAfterFinished": FINISHED_TTL_S, "template": pod_template(s)}
    if s.kind == "IndexedJob":
        spec |= {"completionMode": "Indexed", "completions": s.workers, "parallelism": s.workers}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(s, s.name), "spec": spec}


def headless_service(s: AttemptSettings) -> dict[str, Any]:
    """The Service that gives each worker of an Indexed Job a DNS name its peers reach."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(s, s.name),
            "spec": {"clusterIP": "None", "selector": {LABEL_NAME: s.name}, "publishNotReadyAddresses": True,
                     "ports": [{"name": "tf-worker", "port": s.worker_port, "targetPort": s.worker_port}]}}


def tfjob(s: AttemptSettings) -> dict[str, Any]:
    """The Kubeflow TFJob (kubeflow.org/v1): `workers` Worker replicas, worker 0 the chief."""
    template = pod_template(s)
    template["spec"]["containers"][0]["name"] = "tensorflow"  # the container the operator configures
    return {"apiVersion": f"{TFJOB_GROUP}/{TFJOB_VERSION}", "kind": "TFJob", "metadata": _meta(s, s.name),
            "spec": {"runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None",
                                   "ttlSecondsAfterFinished": FINISHED_TTL_S},
                     "tfReplicaSpecs": {"Worker": {"replicas": s.workers, "restartPolicy": "Never",
                                                   "template": template}}}}


def secret(s: AttemptSettings, values: dict[str, str]) -> dict[str, Any]:
    """The attempt's Secret: `values` (of the `secret_env` names) as `stringData`."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(s, str(secret_name(s))), "type": "Opaque",
            "stringData": dict(values)}


def attempt_objects(s: AttemptSettings, secret_values: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every object of the attempt, in the order they are created (the Secret and Service before the pods)."""
    objects = [secret(s, secret_values or {n: "" for n in s.secret_env})] if s.secret_env else []
    if s.kind == "IndexedJob":
        objects.append(headless_service(s))
    objects.append(tfjob(s) if s.kind == "TFJob" else job(s))
    return objects
