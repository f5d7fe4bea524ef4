"""On the instance: fill a new data volume from the store, then snapshot it (`data.volume: snapshot`).

`python -m spotfit.backends.aws.data_fill SOURCE --region R --job J --manifest M --imds URL`
runs from the user-data once the new data volume is mounted and `SPOTFIT_CACHE_DIR` points at it
(data_volume.py), before the agent starts the runtime:

1. syncs SOURCE into the data cache (stores/datacache.py), as the runtime would;
2. flushes the file systems (a snapshot holds what reached the volume);
3. lists SOURCE again: if its manifest changed during the fill, makes no snapshot (it would be
   tagged with content it does not hold);
4. on the first worker only (IMDS `ami-launch-index` 0), snapshots its data volume with the
   manifest's tag, unless a snapshot of that manifest exists or is being made (snapshots.py):
   then SOURCE is recorded on that one as a tag, so that `spotfit gc` keeps it for this job.

The snapshot completes in the background while the attempt trains. The instance role needs
`ec2:DescribeVolumes`, `ec2:DescribeSnapshots`, `ec2:CreateSnapshot` and `ec2:CreateTags` on
snapshots (at their creation, and on those tagged `spotfit:managed=true`: docs/aws.md#snapshots).
`M` is the manifest the controller listed at launch; a different one now is said in the boot log.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spotfit.backends.aws.client import Ec2Client


def fill_and_snapshot(source: str, cache_dir: str, ec2: Ec2Client, instance_id: str, job_id: str,
                      launch_index: int = 0, workers: int = 16) -> dict[str, Any]:
    """Steps 1–4 above; what was done, for the boot log."""
    from spotfit.backends.aws.snapshots import make_snapshot
    from spotfit.stores.datacache import DataCache
    from spotfit.stores.manifest import dataset_manifest

    started = time.monotonic()
    before = dataset_manifest(source)
    stats = DataCache(cache_dir, workers=workers).sync(source, progress=False)
    os.sync()
    after = dataset_manifest(source)
    report: dict[str, Any] = {"manifest": after.digest, "files": stats.files,
                              "bytes_downloaded": stats.bytes_downloaded, "snapshot": None,
                              "fill_s": round(time.monotonic() - started, 3)}  # listings, sync, flush
    if before.digest != after.digest:
        report["skipped"] = "the data changed while the volume was filled"
    elif launch_index != 0:
        report["skipped"] = "another worker of the attempt snapshots its volume"
    else:
        report["snapshot"] = make_snapshot(ec2, instance_id, source, after.digest, job_id)
        if report["snapshot"] is None:
            report["skipped"] = "a snapshot of this manifest exists or is being made"
    return report


def main(argv: list[str] | None = None) -> int:
    from spotfit.backends.aws.agent import Imds
    from spotfit.backends.aws.client import load_boto3
    from spotfit.host.home import default_cache_dir

    parser = argparse.ArgumentParser(prog="python -m spotfit.backends.aws.data_fill")
    parser.add_argument("source")
    parser.add_argument("--region", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--manifest", default="")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--imds", default="http://169.254.169.254")
    args = parser.parse_args(argv)
    imds = Imds(args.imds)
    instance_id = imds.get("/latest/meta-data/instance-id")
    if not instance_id:
        print("spotfit: no instance id from IMDS, the data volume is not snapshotted")
        return 1
    index = int(imds.get("/latest/meta-data/ami-launch-index") or 0)
    ec2 = load_boto3().client("ec2", region_name=args.region)
    report = fill_and_snapshot(args.source, str(default_cache_dir()), ec2, instance_id, args.job,
                               launch_index=index, workers=args.workers)
    if args.manifest and args.manifest != report["manifest"]:
        print(f"spotfit: the data's manifest is {report['manifest']}, not {args.manifest} as listed at launch")
    print(f"spotfit: data volume filled ({report['files']} files, {report['bytes_downloaded']} bytes downloaded "
          f"in {report['fill_s']:.2f} s); "
          f"snapshot {report['snapshot'] or 'not made: ' + report.get('skipped', '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
