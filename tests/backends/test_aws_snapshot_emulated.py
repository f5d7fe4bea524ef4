"""`data.volume: snapshot` through a spot interruption on the emulated instance: the relaunch downloads no data.

The first instance's user-data mounts its new, empty data volume, fills it from the store (SeaweedFS) and
snapshots it; after the interruption the controller finds that snapshot by the data's manifest, the next
instance (another zone) gets its volume made from it, mounts it, and its runtime's data sync downloads
nothing. moto server keeps the volume and snapshot records; their content is folders
(tests/support/emulated_volumes.py).
"""

from __future__ import annotations

import uuid

import pytest

from spotfit import sdk
from spotfit.stores import open_store
from tests.backends.test_aws_emulated import NOTICE_S, cloud  # noqa: F401  (the fixture)
from tests.support.seaweed import BUCKET

pytestmark = [pytest.mark.slow, pytest.mark.emulated_instance]

SPEC = """
name: snapshot
backend: aws
script: train.py
args: ["--epochs", "1"]
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-west-2a, us-west-2b], preemptions: [{{at_step: 20, notice_s: {notice_s}}}]}}
aws: {{ami: ami-12c6146b, region: us-west-2, runtime_extras: [s3]}}
checkpoint: {{store: "{store}", interval: {{steps: 10}}}}
data: {{source: "{data}", volume: snapshot}}
"""


def test_the_relaunch_mounts_a_volume_made_from_the_first_attempts_snapshot_and_downloads_nothing(
        cloud, job_spec):  # noqa: F811
    prefix = f"s3://{BUCKET}/snapshot-{uuid.uuid4().hex[:6]}"
    data = open_store(f"{prefix}/data")
    for i in range(3):
        data.write_bytes(f"shard-{i}.bin", bytes([i]) * 40_000)
    job_id = sdk.submit(str(job_spec(SPEC.format(store=prefix, data=f"{prefix}/data", notice_s=NOTICE_S))))
    cloud.wait_controller(cloud.start_controller(job_id), job_id)
    booted = list(cloud.instances.values())
    logs = "\n".join(f"--- {i.instance_id} ({i.zone})\n{i.boot_log[-3000:]}" for i in booted)
    doc = sdk.status(job_id)
    assert doc["state"] == "completed", (doc, logs)
    first, second = booted
    assert (first.zone, second.zone) == ("us-west-2a", "us-west-2b"), logs

    # The first boot filled its new volume and snapshotted it; the second mounted a volume made from it.
    assert "data cache on the data volume" in first.boot_log and "snapshot snap-" in first.boot_log, logs
    [snapshot_id] = cloud.volumes.taken
    assert cloud.volumes.made_from == {first.instance_id: None, second.instance_id: snapshot_id}
    assert "data cache on the data volume" in second.boot_log and "data volume filled" not in second.boot_log, logs

    synced = {e["attempt"]: e["data"] for e in sdk.events(job_id) if e["kind"] == "data_synced"}
    first_attempt, second_attempt = sorted(synced)
    assert synced[first_attempt]["bytes_downloaded"] == 0  # data_fill had filled the cache before the runtime
    assert synced[second_attempt]["bytes_downloaded"] == 0 and synced[second_attempt]["hits"] == 3
    assert synced[second_attempt]["path"].startswith(str(cloud.folder / "volumes"))
