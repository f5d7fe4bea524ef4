"""Which disk holds an attempt's data cache on EC2 (pure: no boto3, no network).

`disk_plan` decides from the dataset's size (`data.size_gib` in the job spec; None when not
given) and the instance type:

- an instance type with instance-store NVMe (`NVME_FAMILIES`) keeps the root volume at the
  image's default (no `BlockDeviceMappings`), and the user-data mounts the NVMe and points the
  data cache at it (`nvme_cache=True`);
- otherwise, with a known size, the root gp3 volume is `root_gib + ceil(1.2 × data + 10)` GiB
  (`data_disk.data_disk_gib`: the data, 20% headroom for the cache's partial downloads and a
  checkpoint, 10 GiB for the environment), with IOPS and throughput stated: gp3's baseline
  3,000 IOPS / 125 MiB/s, raised for larger data (`gp3_performance`), within gp3's limits
  (16 TiB, 16,000 IOPS, 1,000 MiB/s);
- with no size, nothing is sent: the image's own root volume, as before.

Example:

>>> p = disk_plan(200 * GIB, "p3.2xlarge")
>>> p.size_gib, p.iops, p.throughput_mibps, p.nvme_cache
(350, 6000, 500, False)
>>> p.block_device_mappings[0]["Ebs"]["VolumeType"]
'gp3'
>>> disk_plan(200 * GIB, "g5.xlarge").nvme_cache, disk_plan(200 * GIB, "g5.xlarge").block_device_mappings
(True, [])
>>> disk_plan(None, "p3.2xlarge").block_device_mappings
[]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spotfit.backends.data_disk import GIB, data_disk_gib
from spotfit.errors import UsageError

DEFAULT_ROOT_GIB = 100  # assumed root of the Deep Learning AMI; `aws.root_volume_gib` overrides it
DEFAULT_ROOT_DEVICE = "/dev/sda1"  # the root device name of the Ubuntu Deep Learning AMIs
GP3_MAX_GIB, GP3_MAX_IOPS, GP3_MAX_MIBPS = 16384, 16000, 1000
NVME_MOUNT = "/opt/dlami/nvme"  # where the Deep Learning AMIs mount instance store; the user-data ensures it

# GPU families whose every size has instance-store NVMe, from the EC2 User Guide's table
# "Instance store volume limits for EC2 instances" (accelerated computing). Kept small and honest:
# a family not listed gets a gp3 root sized for the data instead.
NVME_FAMILIES = frozenset({"p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "g4dn", "g5", "g6", "g6e"})


@dataclass(frozen=True)
class DiskPlan:
    """The root volume to ask for (none: the image's default) and whether NVMe holds the cache."""

    nvme_cache: bool = False
    size_gib: int | None = None
    iops: int | None = None
    throughput_mibps: int | None = None
    block_device_mappings: list[dict[str, Any]] = field(default_factory=list)


def has_instance_store(instance_type: str) -> bool:
    """Whether `instance_type` (e.g. `g5.xlarge`) belongs to a family with instance-store NVMe."""
    return instance_type.split(".", 1)[0] in NVME_FAMILIES


def root_size_gib(data_bytes: int, root_gib: int = DEFAULT_ROOT_GIB) -> int:
    """The root volume for `data_bytes` of data: root + data + 20% + 10 GiB, in whole GiB."""
    return root_gib + data_disk_gib(data_bytes)


def gp3_performance(data_bytes: int) -> tuple[int, int]:
    """(IOPS, MiB/s): gp3's baseline under 100 GiB of data, more above (a cold sync is a bulk write)."""
    data_gib = data_bytes / GIB
    if data_gib >= 1000:
        return GP3_MAX_IOPS, GP3_MAX_MIBPS
    if data_gib >= 100:
        return 6000, 500
    return 3000, 125


def disk_plan(data_bytes: int | None, instance_type: str, root_gib: int = DEFAULT_ROOT_GIB,
              root_device: str = DEFAULT_ROOT_DEVICE) -> DiskPlan:
    """The disk of an attempt for `data_bytes` of data (None: unknown) on `instance_type`."""
    if has_instance_store(instance_type):
        return DiskPlan(nvme_cache=True)
    if data_bytes is None:
        return DiskPlan()
    size = root_size_gib(data_bytes, root_gib)
    if size > GP3_MAX_GIB:
        raise UsageError(f"Invalid `data.size_gib`: received {data_bytes / GIB:.0f} GiB, expected a dataset "
                         f"that fits one gp3 volume ({GP3_MAX_GIB} GiB with the root and headroom).",
                         hint="Choose an instance type with instance-store NVMe, or split the dataset.")
    iops, mibps = gp3_performance(data_bytes)
    mapping = {"DeviceName": root_device,
               "Ebs": {"VolumeSize": size, "VolumeType": "gp3", "Iops": iops, "Throughput": mibps,
                       "DeleteOnTermination": True}}
    return DiskPlan(size_gib=size, iops=iops, throughput_mibps=mibps, block_device_mappings=[mapping])


def nvme_script(mount: str = NVME_MOUNT) -> str:
    """User-data lines: mount the instance-store NVMe at `mount` (unless the image did) and cache data there."""
    return f"""\
if ! mountpoint -q {mount}; then
  NVME="$(lsblk -dpno NAME,MODEL | awk '/Instance Storage/ {{print $1}}' | head -n 1 || true)"
  if [ -n "$NVME" ]; then
    (mkfs.ext4 -q -F "$NVME" && mkdir -p {mount} && mount "$NVME" {mount}) \\
      || echo "spotfit: could not mount $NVME, the data cache stays on the root volume"
  fi
fi
if mountpoint -q {mount}; then
  mkdir -p {mount}/spotfit-cache && export SPOTFIT_CACHE_DIR={mount}/spotfit-cache
  echo "spotfit: data cache on instance-store NVMe at {mount}"
fi
"""
