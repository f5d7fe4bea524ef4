"""The data snapshots of `data.volume: snapshot` on EC2: find, make, speed up, and collect them.

A snapshot is regional: every zone of the region creates volumes from it. It carries the tags
`spotfit:managed=true`, `spotfit:data-manifest=<digest>` (stores/manifest.py: the content it
holds), `spotfit:data-source=<URL>` and `spotfit:job` (the job whose attempt made it).

It is keyed by content, not by source: two `data.source`s with identical content share one
snapshot. Each other source that uses it is recorded on it as one more tag,
`spotfit:data-source/<hash of the URL>=<URL>` (`record_source`): by the controller at each launch
from it, and by the instance whose fill found it already made (a launch that raced its making).
`spotfit gc` keeps a snapshot while any of its sources is kept. This is chosen over keeping by
the live jobs' manifests because gc then lists no dataset (no store credentials or listing of a
large dataset at clean-up time, and an unreachable store cannot make gc delete a snapshot a job
uses), and because a job whose data changed since keeps its snapshot's newest one all the same.

- `data_volume(ec2, ...)`: at launch, list the data (its manifest and size) and look for a
  completed snapshot with that manifest; the `DataVolume` the request carries (data_volume.py).
- `enable_fast_restore`: fast snapshot restore in one zone, only when `aws.fast_snapshot_restore`
  asks (billed per snapshot and zone-hour; docs/aws.md#snapshots).
- `make_snapshot`: on the instance, once the volume is filled (backends/aws/data_fill.py).
- `record_source`: one more source that uses a snapshot, as a tag.
- `unused_snapshots`: for `spotfit gc`, those none of whose sources a kept job names, or whose
  every kept source has a newer completed snapshot (its data changed since).

Example (moto answers these in tests/backends/test_aws_snapshots.py):

>>> vol = data_volume(ec2, "s3://bucket/data", size_gib=None, fast_restore=False)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any

from spotfit.backends.aws.client import error_code
from spotfit.backends.aws.data_volume import DATA_DEVICE, TAG_MANIFEST, TAG_SOURCE, DataVolume, source_tag
from spotfit.backends.aws.disks import gp3_performance
from spotfit.backends.aws.launch import TAG_JOB, TAG_MANAGED
from spotfit.backends.data_disk import GIB, data_disk_gib

if TYPE_CHECKING:
    from datetime import datetime

    from spotfit.backends.aws.client import Ec2Client
    from spotfit.backends.base import LaunchOptions

TAG_MADE_AT = "spotfit:made-at"  # epoch seconds: orders two snapshots of one source that EC2 started in one second
TAG_ALSO_SOURCE = TAG_SOURCE + "/"  # + a hash of the URL: another source that uses the snapshot (record_source)


def find_snapshot(ec2: Ec2Client, manifest: str, states: tuple[str, ...] = ("completed",)) -> dict[str, Any] | None:
    """The newest snapshot of this account holding the data of `manifest`, in one of `states`."""
    found = ec2.describe_snapshots(OwnerIds=["self"], Filters=[
        {"Name": f"tag:{TAG_MANIFEST}", "Values": [manifest]},
        {"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]},
        {"Name": "status", "Values": list(states)}])["Snapshots"]
    return max(found, key=lambda s: s["StartTime"]) if found else None


def data_volume(ec2: Ec2Client, source: str, size_gib: float | None, fast_restore: bool) -> DataVolume:
    """The data volume of an attempt: sized for the data (listed now) and from its snapshot if one exists."""
    from spotfit.stores.manifest import dataset_manifest

    manifest = dataset_manifest(source)
    data_bytes = max(manifest.bytes_total, int((size_gib or 0) * GIB))
    size = data_disk_gib(data_bytes)
    snapshot = find_snapshot(ec2, manifest.digest)
    if snapshot is not None:
        size = max(size, int(snapshot["VolumeSize"]))  # a volume is never smaller than its snapshot
    iops, mibps = gp3_performance(data_bytes)
    return DataVolume(source=source, size_gib=size, iops=iops, throughput_mibps=mibps, manifest=manifest.digest,
                      snapshot_id=snapshot["SnapshotId"] if snapshot else None, fast_restore=fast_restore)


def planned_volume(opts: LaunchOptions, ec2: Ec2Client | None) -> DataVolume | None:
    """The data volume the launch options ask for (`data.volume: snapshot`), else None.

    `ec2` None (a dry run): nothing is listed or looked up, and without `data.size_gib` the size
    is the placeholder `{data_volume_gib}`.
    """
    from spotfit.backends.aws.spec import Aws

    if opts.data.volume != "snapshot" or not opts.data.source:
        return None
    source, size_gib, fast = opts.data.source, opts.data.size_gib, bool(opts.section_as(Aws).fast_snapshot_restore)
    if ec2 is not None:
        return data_volume(ec2, source, size_gib, fast)
    data_bytes = int(size_gib * GIB) if size_gib else 0
    iops, mibps = gp3_performance(data_bytes)
    return DataVolume(source=source, size_gib=data_disk_gib(data_bytes) if size_gib else "{data_volume_gib}",
                      iops=iops, throughput_mibps=mibps, fast_restore=fast)


def enable_fast_restore(ec2: Ec2Client, snapshot_id: str, zone: str) -> None:
    """Fast snapshot restore of `snapshot_id` in `zone` (already enabled or enabling: nothing changes)."""
    ec2.enable_fast_snapshot_restores(AvailabilityZones=[zone], SourceSnapshotIds=[snapshot_id])


def make_snapshot(ec2: Ec2Client, instance_id: str, source: str, manifest: str, job_id: str) -> str | None:
    """Snapshot the data volume of `instance_id`; None when a snapshot of `manifest` exists or is being made."""
    existing = find_snapshot(ec2, manifest, states=("pending", "completed"))
    if existing is not None:
        record_source(ec2, existing, source)  # this job's source uses it too: gc keeps it for this job
        return None
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]},
                                            {"Name": "attachment.device", "Values": [DATA_DEVICE]}])["Volumes"]
    if not volumes:
        raise LookupError(f"instance {instance_id} has no data volume at {DATA_DEVICE}")
    tags = {TAG_MANAGED: "true", TAG_MANIFEST: manifest, TAG_SOURCE: source_tag(source), TAG_JOB: job_id,
            TAG_MADE_AT: f"{time.time():.6f}", "Name": f"spotfit-data-{manifest[:12]}"}
    snapshot = ec2.create_snapshot(
        VolumeId=volumes[0]["VolumeId"], Description=f"spotfit data cache of {source}"[:255],
        TagSpecifications=[{"ResourceType": "snapshot", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    return str(snapshot["SnapshotId"])


def _tag(snapshot: dict[str, Any], key: str) -> str:
    return next((t["Value"] for t in snapshot.get("Tags", []) if t["Key"] == key), "")


def _made(snapshot: dict[str, Any]) -> tuple[datetime, float]:
    """When a snapshot was made: EC2's start time, then the instance's clock to the microsecond (ties)."""
    return snapshot["StartTime"], float(_tag(snapshot, TAG_MADE_AT) or 0)


def snapshot_sources(snapshot: dict[str, Any]) -> list[str]:
    """The sources that used `snapshot` (tag values): the one it was made for first, then the others sorted."""
    also = sorted(t["Value"] for t in snapshot.get("Tags", []) if t["Key"].startswith(TAG_ALSO_SOURCE))
    first = _tag(snapshot, TAG_SOURCE)
    return [first] + [s for s in also if s != first]


def record_source(ec2: Ec2Client, snapshot: dict[str, Any] | str, source: str) -> bool:
    """Tag `snapshot` (its id or its description) with one more source that uses it, unless it has it already.

    False when EC2 refuses one more tag (50 at most per snapshot): gc then keeps it only for its other sources.
    """
    described: dict[str, Any] = (ec2.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"][0]
                       if isinstance(snapshot, str) else snapshot)
    value = source_tag(source)
    if value in snapshot_sources(described):
        return True
    key = TAG_ALSO_SOURCE + hashlib.sha256(value.encode()).hexdigest()[:16]
    try:
        ec2.create_tags(Resources=[described["SnapshotId"]], Tags=[{"Key": key, "Value": value}])
    except Exception as exc:
        if error_code(exc) == "TagLimitExceeded":
            return False
        raise
    return True


def unused_snapshots(ec2: Ec2Client, keep_sources: set[str]) -> dict[str, str]:
    """{snapshot id: its sources, comma-separated} of the data snapshots no kept job uses (`keep_sources`: the
    kept jobs' sources).

    A snapshot is kept while one of its sources (`snapshot_sources`) is kept and no newer completed
    snapshot of that source replaced it (its data changed since).
    """
    found = ec2.describe_snapshots(OwnerIds=["self"], Filters=[
        {"Name": f"tag:{TAG_MANAGED}", "Values": ["true"]}, {"Name": "tag-key", "Values": [TAG_MANIFEST]}])["Snapshots"]
    kept = {source_tag(s) for s in keep_sources}
    newest: dict[str, tuple[datetime, float]] = {}
    for snap in found:
        if snap["State"] == "completed":
            for src in snapshot_sources(snap):
                newest[src] = max(newest.get(src, _made(snap)), _made(snap))
    unused: dict[str, str] = {}
    for snap in found:
        sources = snapshot_sources(snap)
        if not any(src in kept and not (snap["State"] == "completed" and _made(snap) < newest[src])
                   for src in sources):
            unused[snap["SnapshotId"]] = ", ".join(sources)
    return unused


def delete_snapshot(ec2: Ec2Client, snapshot_id: str) -> bool:
    """Delete a data snapshot (its fast snapshot restores first); False while a volume is being made from it."""
    try:
        zones = [z["AvailabilityZone"] for z in ec2.describe_fast_snapshot_restores(Filters=[
            {"Name": "snapshot-id", "Values": [snapshot_id]}]).get("FastSnapshotRestores", [])
            if z.get("State") not in ("disabling", "disabled")]
        if zones:
            ec2.disable_fast_snapshot_restores(AvailabilityZones=zones, SourceSnapshotIds=[snapshot_id])
        ec2.delete_snapshot(SnapshotId=snapshot_id)
    except Exception as exc:
        code = error_code(exc)
        if code == "InvalidSnapshot.NotFound":
            return True
        if code == "InvalidSnapshot.InUse":
            return False
        raise
    return True

