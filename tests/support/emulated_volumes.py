"""EBS data volumes and their snapshots for the emulated instance (tests/support/emulated_instance.py), as folders.

moto keeps the records (a volume attached at `/dev/sdf`, made from a snapshot or not; a snapshot of a
volume) but no content. Here each data volume is a folder, `volumes/<vol id>`, and each data snapshot a
copy of its volume's folder, `snapshots/<snap id>`, taken when moto first lists the snapshot (the
instance makes it once the volume is filled and flushed, data_fill.py). A volume made from a snapshot
starts as a copy of the snapshot's folder.

The sandbox gets stand-ins for the tools the user-data's mount lines call (data_volume.mount_script):
`lsblk` lists the volume as an EBS disk, `blkid` and `mkfs.ext4` read and write a file-system marker,
`mount` links the mount point to the volume's folder and `mountpoint` tells whether it is linked. An
instance without a data volume gets them too: `lsblk` then lists nothing, so no host disk is touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from botocore.exceptions import ClientError

from spotfit.backends.aws.data_volume import TAG_MANIFEST

DEVICE = "/dev/emulated-sdf"

_LSBLK = """#!/bin/bash
# Stands in for lsblk: the data volume is the only EBS disk; its mount point, once mounted.
if [ "$*" = "-dpno NAME,MODEL" ]; then
  {listing}
else
  cat {state}/mountpoint 2>/dev/null || true
fi
"""
_BLKID = """#!/bin/bash
[ -f {volume}/.emulated-ext4 ]
"""
_MKFS = """#!/bin/bash
touch {volume}/.emulated-ext4
"""
_MOUNT = """#!/bin/bash
# mount DEVICE DIR: DIR becomes a link to the volume's folder.
dir="${{@: -1}}"
rmdir "$dir" && ln -s {volume} "$dir" && echo "$dir" > {state}/mountpoint
"""
_MOUNTPOINT = """#!/bin/bash
dir="${{@: -1}}"
[ -L "$dir" ] && [ "$(readlink "$dir")" = {volume} ]
"""


class EmulatedVolumes:
    """Folders for the data volumes and snapshots moto records; `tick()` copies each new snapshot once."""

    def __init__(self, folder: Path, ec2) -> None:
        self.volumes, self.snapshots = folder / "volumes", folder / "snapshots"
        self.volumes.mkdir(parents=True, exist_ok=True)
        self.snapshots.mkdir(parents=True, exist_ok=True)
        self.ec2 = ec2
        self.taken: dict[str, str] = {}  # snapshot id -> volume id
        self.made_from: dict[str, str | None] = {}  # instance id -> the snapshot its data volume was made from

    def tick(self) -> None:
        # The data snapshots are found by their tag, then described: moto's `describe_snapshots` with
        # a tag filter reads the tags of each of its ~1300 default snapshots (0.1 s of CPU a call,
        # a whole core at the harness's 10 ticks a second); its `describe_tags` reads only tags.
        tags = self.ec2.describe_tags(Filters=[{"Name": "resource-type", "Values": ["snapshot"]},
                                               {"Name": "key", "Values": [TAG_MANIFEST]}])["Tags"]
        new = sorted({t["ResourceId"] for t in tags} - self.taken.keys())
        if not new:
            return
        try:
            found = self.ec2.describe_snapshots(SnapshotIds=new)["Snapshots"]
        except ClientError as exc:  # one was deleted since (gc): the next tick lists what is left
            if exc.response["Error"]["Code"] != "InvalidSnapshot.NotFound":
                raise
            return
        for snap in found:
            if (self.volumes / snap["VolumeId"]).is_dir():
                shutil.copytree(self.volumes / snap["VolumeId"], self.snapshots / snap["SnapshotId"], symlinks=True)
                self.taken[snap["SnapshotId"]] = snap["VolumeId"]

    def attach(self, instance_id: str, bin_dir: Path, state: Path) -> Path | None:
        """The instance's data volume folder (None: it has none), and the tools' stand-ins in `bin_dir`."""
        vols = self.ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]},
                                                  {"Name": "attachment.device", "Values": ["/dev/sdf"]}])["Volumes"]
        volume = None
        if vols:
            volume = self.volumes / vols[0]["VolumeId"]
            self.made_from[instance_id] = vols[0].get("SnapshotId") or None
            source = self.snapshots / (vols[0].get("SnapshotId") or "-")
            if source.is_dir():
                shutil.copytree(source, volume, symlinks=True)
            else:
                volume.mkdir()
        state.mkdir(parents=True, exist_ok=True)
        target = str(volume or state / "no-volume")
        listing = f'echo "{DEVICE} Amazon Elastic Block Store"' if volume else "true"
        for name, text in (("lsblk", _LSBLK), ("blkid", _BLKID), ("mkfs.ext4", _MKFS), ("mount", _MOUNT),
                           ("mountpoint", _MOUNTPOINT)):
            path = bin_dir / name
            path.write_text(text.format(listing=listing, state=state, volume=target))
            path.chmod(0o755)
        return volume
