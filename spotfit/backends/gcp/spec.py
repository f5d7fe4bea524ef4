"""The `gcp:` section of a job spec (docs/gcp.md) and the launch options the backend gets from it.

Example:

>>> Gcp(project="my-project").external_ip, Gcp(project="my-project").image_family
(False, 'tf-2-17-cu121')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from spotfit.spec.base import BackendSection, matching

if TYPE_CHECKING:
    from spotfit.backends.base import LaunchOptions
    from spotfit.spec.job import JobSpec

DEFAULT_IMAGE_PROJECT = "deeplearning-platform-release"
DEFAULT_IMAGE_FAMILY = "tf-2-17-cu121"  # a Deep Learning VM image with TensorFlow and CUDA
DEFAULT_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write",
                  "https://www.googleapis.com/auth/cloud-platform.read-only"]
_ZONE = r"[a-z]+-[a-z]+\d+-[a-z]"


class Gcp(BackendSection):
    """The `gcp` backend's settings (docs/gcp.md); zones come from `market.zones`."""

    project: str | None = Field(None, description="project id; default $GOOGLE_CLOUD_PROJECT")
    region: str | None = Field(None, description="region when no zone is given; default the one `spotfit plan` "
                                                    "ranks cheapest (with `market.trace: null`), else us-central1")
    zones: list[str] = Field(default_factory=list, description="zones to launch in when `market.zones` is empty")
    machine_type: str | None = Field(None, description="override the machine type chosen for the accelerator")
    service_account: str | None = Field(None, description="service account e-mail the VM runs as (storage and "
                                                          "Secret Manager access); default none")
    scopes: list[str] = Field(default_factory=lambda: list(DEFAULT_SCOPES),
                              description="OAuth scopes of the service account: storage read/write only")
    network: str = Field("global/networks/default", description="VPC network")
    subnetwork: str | None = Field(None, description="subnetwork, e.g. regions/us-central1/subnetworks/NAME")
    external_ip: bool = Field(False, description="give the VM an external IP (default none: Cloud NAT or "
                                                 "Private Google Access reach the store)")
    image_project: str = Field(DEFAULT_IMAGE_PROJECT, description="project of the boot image family")
    image_family: str = Field(DEFAULT_IMAGE_FAMILY, description="boot image family (a Deep Learning VM image "
                                                               "with TensorFlow)")
    disk_size_gib: int = Field(100, ge=10, le=65536, description="boot disk; the data's size is added to it")
    disk_type: str = Field("pd-balanced", description="boot disk type: pd-balanced, pd-ssd, pd-standard")
    runtime_pip: str | None = Field(None, description="a published spotfit to pip-install instead of the shipped wheel")
    runtime_extras: list[str] = Field(default_factory=lambda: ["gcs"],
                                      description="extras of the shipped wheel (the image brings TensorFlow)")
    worker_port: int = Field(2222, ge=1024, le=65535, description="TF worker port")
    boot_timeout_s: float = Field(1800.0, gt=0, description="an attempt with no runtime progress by then failed")

    @field_validator("project")
    @classmethod
    def _project_id(cls, value: str | None) -> str | None:
        if value is None:
            return value
        return matching(value, r"[a-z][-a-z0-9]{4,28}[a-z0-9]",
                        "a project id: 6-30 lowercase letters, digits and `-`, starting with a letter")

    @field_validator("zones")
    @classmethod
    def _zone_names(cls, value: list[str]) -> list[str]:
        for zone in value:
            matching(zone, _ZONE, "a Compute Engine zone such as us-central1-a")
        return value


def gcp_options(spec: JobSpec) -> LaunchOptions:
    """The `gcp:` section for the backend, with the data size, the notebook extra of a notebook job and the
    job's `environment` resolved as the AWS backend resolves it (the requirements file's text)."""
    from spotfit.backends.base import DataOptions, LaunchOptions
    from spotfit.backends.environment import environment_options

    section = Gcp.of(spec)
    return LaunchOptions(section=section, runtime_extras=tuple(spec.runtime_extras(section.runtime_extras)),
                         runtime_pip=section.runtime_pip,
                         data=DataOptions.of(spec), environment=environment_options(spec),
                         has_secrets=bool(spec.secrets or spec.is_notebook))  # the VM reads them: cloud-platform
