"""The `kubernetes:` section of a job spec (docs/kubernetes.md) and the launch options the backend gets from it.

Example:

>>> Kubernetes(namespace="team-a", spot="gke").grace_s
120
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from spotfit.spec.base import BackendSection, matching

if TYPE_CHECKING:
    from spotfit.backends.base import LaunchOptions
    from spotfit.spec.job import JobSpec

KubernetesProfile = Literal["eks", "gke", "aks", "custom"]
MultiWorker = Literal["auto", "tfjob", "indexed"]
DEFAULT_IMAGE = "tensorflow/tensorflow:2.21.0-gpu"


class Kubernetes(BackendSection):
    """The `kubernetes` backend's settings (docs/kubernetes.md)."""

    kubeconfig: str | None = Field(None, description="kubeconfig path; default $KUBECONFIG, ~/.kube/config, in-cluster")
    context: str | None = Field(None, description="kubeconfig context; default the current one")
    namespace: str = Field("default", description="namespace of the attempts' objects")
    spot: KubernetesProfile | None = Field(None, description="node pool profile: eks, gke, aks or custom")
    spot_selector: dict[str, str] = Field(default_factory=dict, description="custom: node labels of spot nodes")
    on_demand_selector: dict[str, str] = Field(default_factory=dict,
                                               description="custom: node labels of on-demand nodes")
    spot_tolerations: list[dict[str, str]] = Field(default_factory=list, description="custom: tolerations for spot")
    image: str = Field(DEFAULT_IMAGE, description="container image with TensorFlow and Python 3.11")
    runtime_wheel: str | None = Field(None, description="store URL of a spotfit wheel the pod installs instead of "
                                                       "the shipped one")
    runtime_pip: str | None = Field(None, description="a published spotfit to pip-install instead of the shipped wheel")
    runtime_extras: list[str] = Field(default_factory=lambda: ["s3", "gcs"],
                                      description="extras of the installed wheel (the image brings TensorFlow)")
    service_account: str | None = Field(None, description="service account with storage access (IRSA, workload "
                                                          "identity)")
    secret_env: list[str] = Field(default_factory=list, description="variables copied from the controller's "
                                                                    "environment into the attempt's Secret")
    env_from_secrets: list[str] = Field(default_factory=list, description="existing Secrets passed as environment")
    multi_worker: MultiWorker = Field("auto", description="several workers: tfjob, indexed, or auto (TFJob if its "
                                                          "CRD is installed)")
    grace_s: int = Field(120, ge=10, le=3600, description="terminationGracePeriodSeconds: time to checkpoint")
    worker_port: int = Field(2222, ge=1024, le=65535, description="TF worker port")
    pending_timeout_s: float = Field(600.0, gt=0, description="an attempt whose pods have no node by then ends "
                                                              "no_capacity (an empty spot pool)")
    data_storage_class: str | None = Field(None, description="StorageClass of the pod's data cache volume (with "
                                                             "`data.size_gib`); default the cluster's default")
    price_usd_per_h: float | None = Field(None, gt=0, description="$/h of one node, for instance types the "
                                                                 "catalog does not price (docs/costs.md)")
    live_prices: bool = Field(False, description="price spot nodes on AWS (spot: eks, or an aws:// providerID) "
                                                 "from the EC2 spot price history, not the catalog")

    @field_validator("namespace")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        return matching(value, r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
                        "a namespace name: lowercase letters, digits and `-`, at most 63")

    @model_validator(mode="after")
    def _custom_needs_selector(self) -> Kubernetes:
        if self.spot == "custom" and not self.spot_selector:
            raise ValueError("`spot: custom` needs `spot_selector` (the node labels of your spot pool)")
        return self

    @model_validator(mode="after")
    def _live_prices_readable(self) -> Kubernetes:
        if self.live_prices and self.spot in ("gke", "aks"):
            raise ValueError(f"`live_prices: true` reads AWS spot prices only; received `spot: {self.spot}`, "
                             "expected `spot: eks` or `custom` (or none) on AWS nodes; the catalog prices the others")
        return self

    @model_validator(mode="after")
    def _one_runtime_source(self) -> Kubernetes:
        if self.runtime_wheel and self.runtime_pip:
            raise ValueError("expected at most one of `runtime_wheel` and `runtime_pip` (where the pod's spotfit "
                             "comes from)")
        return self


def kubernetes_options(spec: JobSpec) -> LaunchOptions:
    """The `kubernetes:` section for the backend, with the notebook extra (and its token) for a notebook job."""
    from spotfit.backends.base import DataOptions, LaunchOptions

    section = Kubernetes.of(spec)
    return LaunchOptions(section=section, runtime_extras=tuple(spec.runtime_extras(section.runtime_extras)),
                         runtime_pip=section.runtime_pip,
                         data=DataOptions.of(spec), notebook_token=spec.is_notebook)
