"""The `aws:` section of a job spec (docs/aws.md) and the launch options the backend gets from it.

Example:

>>> Aws(region="eu-west-1").boot_timeout_s
1800.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from spotfit.spec.base import BackendSection

if TYPE_CHECKING:
    from spotfit.backends.aws.cloudwatch import CloudWatchPublisher
    from spotfit.backends.base import LaunchOptions
    from spotfit.spec.job import JobSpec


class Aws(BackendSection):
    """The `aws` backend's settings (docs/aws.md); zones come from `market.zones`."""

    region: str | None = Field(None, description="region when no zone is given; default us-east-1")
    instance_type: str | None = Field(None, description="override the catalog's type for the accelerator")
    ami: str | None = Field(None, description="`ami-...`, `ssm:/param` or `name:PATTERN`; default Deep Learning AMI")
    key_name: str | None = Field(None, description="EC2 key pair for SSH; none = no SSH (use SSM)")
    ssh_cidr: str | None = Field(None, description="the one address SSH is open to, e.g. 203.0.113.7/32")
    subnet: str | None = Field(None, description="subnet id; default: the default VPC")
    iam_instance_profile: str | None = Field(None, description="instance profile (name or ARN) for storage access")
    runtime_pip: str | None = Field(None, description="a published spotfit to pip-install instead of the shipped wheel")
    runtime_extras: list[str] = Field(default_factory=lambda: ["tf-gpu", "s3"],
                                      description="extras of the shipped wheel; [s3] on an image with TF")
    worker_port: int = Field(2222, ge=1024, le=65535, description="TF worker port, open only inside the job's group")
    boot_timeout_s: float = Field(1800.0, gt=0, description="an attempt with no runtime progress by then failed")
    root_volume_gib: int = Field(100, ge=8, le=16384, description="the image's root volume; the data's size is "
                                                               "added to it (docs/aws.md#disks)")
    root_device: str = Field("/dev/sda1", description="the image's root device name (Ubuntu Deep Learning AMIs: "
                                                      "/dev/sda1)")
    fast_snapshot_restore: bool = Field(False, description="with `data.volume: snapshot`: enable fast snapshot "
                                                          "restore of the data snapshot in each zone launched in; "
                                                          "billed per zone-hour (docs/aws.md#snapshots)")
    cloudwatch: bool = Field(False, description="publish step rate, loss, GPU use and spend as CloudWatch custom "
                                                "metrics (docs/costs.md)")

    @field_validator("ssh_cidr")
    @classmethod
    def _one_address(cls, value: str | None) -> str | None:
        import ipaddress

        if value is None:
            return value
        try:
            net = ipaddress.ip_network(value, strict=True)
        except ValueError:
            raise ValueError("expected one address as a /32 or /128 network, e.g. 203.0.113.7/32") from None
        if net.num_addresses != 1:
            raise ValueError("expected one address (/32 or /128): SSH is never opened to a range or the world")
        return value


    def publisher(self, job_id: str, job_name: str) -> CloudWatchPublisher | None:
        """With `cloudwatch: true`, the job's metrics go to CloudWatch in the section's region."""
        from spotfit.backends.aws.cloudwatch import CloudWatchPublisher

        return CloudWatchPublisher(job_id, job_name, self.region) if self.cloudwatch else None


def aws_options(spec: JobSpec) -> LaunchOptions:
    """The `aws:` section for the backend, with `environment` resolved (the requirements file's text)."""
    from spotfit.backends.base import DataOptions, LaunchOptions
    from spotfit.backends.environment import environment_options

    section = Aws.of(spec)
    return LaunchOptions(section=section, runtime_extras=tuple(spec.runtime_extras(section.runtime_extras)),
                         runtime_pip=section.runtime_pip,
                         data=DataOptions.of(spec), environment=environment_options(spec))
