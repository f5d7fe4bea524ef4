"""`data.volume: snapshot`: the attempt's data cache on its own EBS volume, made from a snapshot (pure).

The first attempt of a dataset gets an empty gp3 data volume (`/dev/sdf`) in its
`RunInstances` request; its user-data formats and mounts it at `$ROOT/data` (`mount_script`),
points the data cache there, fills it from the store and snapshots it (`fill_script`, which runs
`backends/aws/data_fill.py`). The snapshot is tagged with the manifest digest of the data
(stores/manifest.py). Every later attempt whose data has the same manifest, in any zone of the
region, gets its data volume created from that snapshot by the same mapping plus `SnapshotId`:
EBS loads the blocks lazily as they are read, and the runtime's sync finds every file already
cached. `snapshots.py` finds the snapshot at launch; `spotfit gc` deletes those no job uses.

Example:

>>> v = DataVolume(source="s3://b/data", size_gib=250, iops=6000, throughput_mibps=500, manifest="ab12",
...                snapshot_id="snap-1")
>>> v.mapping["DeviceName"], v.mapping["Ebs"]["SnapshotId"], v.mapping["Ebs"]["VolumeSize"]
('/dev/sdf', 'snap-1', 250)
>>> "made from snapshot snap-1" in v.describe()
True
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

DATA_DEVICE = "/dev/sdf"  # Xen types show it as /dev/xvdf, Nitro types as an NVMe disk (mount_script finds it)
TAG_MANIFEST = "spotfit:data-manifest"
TAG_SOURCE = "spotfit:data-source"
TAG_VALUE_MAX = 256  # EC2's limit on a tag value: a longer source URL is cut there (gc compares it cut too)


@dataclass(frozen=True)
class DataVolume:
    """The data volume of an attempt: its size and, when one matches the data's manifest, its snapshot.

    `manifest` is None (and sizes may be placeholders) in a dry run, which looks nothing up.
    """

    source: str
    size_gib: int | str
    iops: int = 3000
    throughput_mibps: int = 125
    manifest: str | None = None
    snapshot_id: str | None = None
    fast_restore: bool = False

    @property
    def mapping(self) -> dict[str, Any]:
        """The `BlockDeviceMappings` entry: a gp3 volume, from the snapshot when there is one."""
        ebs: dict[str, Any] = {"VolumeSize": self.size_gib, "VolumeType": "gp3", "Iops": self.iops,
                               "Throughput": self.throughput_mibps, "DeleteOnTermination": True}
        if self.snapshot_id:
            ebs["SnapshotId"] = self.snapshot_id
        return {"DeviceName": DATA_DEVICE, "Ebs": ebs}

    def describe(self) -> str:
        """One line for the dry run's summary."""
        size = f"gp3 {self.size_gib} GiB, {self.iops} IOPS, {self.throughput_mibps} MiB/s"
        if self.snapshot_id:
            fast = ", fast snapshot restore asked" if self.fast_restore else ""
            return f"data volume {DATA_DEVICE}: {size}, made from snapshot {self.snapshot_id}{fast}"
        if self.manifest is None:
            return (f"data volume {DATA_DEVICE}: {size}; made from the snapshot of {self.source} when one matches "
                    "its manifest at launch, else filled from the store and snapshotted")
        return f"data volume {DATA_DEVICE}: {size}, empty: filled from {self.source}, then snapshotted"


def source_tag(source: str) -> str:
    """The `spotfit:data-source` tag value of a snapshot of `source`."""
    return source.rstrip("/")[:TAG_VALUE_MAX]


def mount_script() -> str:
    """User-data lines: find the data volume, format it if it is new, mount it at `$ROOT/data`, cache there."""
    return """\
DATA_DIR="$ROOT/data"
if ! mountpoint -q "$DATA_DIR"; then
  DEV=""
  for d in /dev/sdf /dev/xvdf; do if [ -b "$d" ]; then DEV="$(readlink -f "$d")"; break; fi; done
  if [ -z "$DEV" ]; then
    # Nitro: the EBS disk that holds no mounted file system (the root's disk does).
    for d in $(lsblk -dpno NAME,MODEL 2>/dev/null | awk '/Elastic Block Store/ {print $1}'); do
      if [ -z "$(lsblk -no MOUNTPOINT "$d" | tr -d '[:space:]')" ]; then DEV="$d"; break; fi
    done
  fi
  if [ -n "$DEV" ]; then
    # A volume made from a snapshot has its file system; a new one is formatted.
    ( (blkid "$DEV" >/dev/null 2>&1 || mkfs.ext4 -q -L spotfit-data "$DEV") && mkdir -p "$DATA_DIR" \\
      && mount "$DEV" "$DATA_DIR" ) || echo "spotfit: could not mount the data volume $DEV"
  else
    echo "spotfit: no data volume found, the data cache stays on the root volume"
  fi
fi
if mountpoint -q "$DATA_DIR"; then
  mkdir -p "$DATA_DIR/spotfit-cache" && export SPOTFIT_CACHE_DIR="$DATA_DIR/spotfit-cache"
  echo "spotfit: data cache on the data volume at $DATA_DIR"
fi
"""


def fill_script(volume: DataVolume, region: str, job_id: str, workers: int = 16) -> str:
    """User-data lines (after `mount_script`): fill the new volume from the store and snapshot it.

    A failure here does not end the attempt: the runtime then syncs the data itself.
    """
    args = " ".join(shlex.quote(a) for a in (volume.source, "--region", region, "--job", job_id,
                                             "--manifest", volume.manifest or "", "--workers", str(workers)))
    return f"""\
if [ -n "${{SPOTFIT_CACHE_DIR:-}}" ] && [ "${{SPOTFIT_CACHE_DIR}}" = "$DATA_DIR/spotfit-cache" ]; then
  "$VENV/bin/python" -m spotfit.backends.aws.data_fill {args} --imds "$IMDS" \\
    || echo "spotfit: the data snapshot was not made; the runtime syncs the data itself"
fi
"""


def boot_script(volume: DataVolume | None, region: str, job_id: str, workers: int = 16) -> str:
    """The user-data lines of the data volume: mount it, and fill and snapshot it when it is new."""
    if volume is None:
        return ""
    return mount_script() + ("" if volume.snapshot_id else fill_script(volume, region, job_id, workers))
