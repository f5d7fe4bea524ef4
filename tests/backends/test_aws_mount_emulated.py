"""`data.mode: mount` on the emulated instance: the runtime mounts a SeaweedFS bucket with rclone and copies nothing.

Runs where `/dev/fuse` opens and rclone is installed (the user-data installs it with apt on EC2, unless the
image has it; here the host's rclone is on the sandbox's `PATH`), and is skipped with the reason elsewhere.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.runtime.datamount import fuse_problem
from spotfit.stores import open_store
from tests.backends.test_aws_emulated import cloud  # noqa: F401  (the fixture)
from tests.support.seaweed import BUCKET
from tests.support.wait import wait_for

_CANNOT = fuse_problem() or (None if shutil.which("rclone") else "rclone is not installed")
pytestmark = [pytest.mark.slow, pytest.mark.emulated_instance,
              pytest.mark.skipif(bool(_CANNOT), reason=f"cannot mount here: {_CANNOT}")]

SPEC = """
name: mount
backend: aws
script: train.py
args: ["--epochs", "1"]
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-west-2a]}}
aws: {{ami: ami-12c6146b, region: us-west-2, runtime_extras: [s3]}}
checkpoint: {{store: "{store}", interval: {{steps: 10}}}}
data: {{source: "{data}", mode: mount}}
"""


def _fuse_mounts_under(folder: Path) -> list[str]:
    lines = Path("/proc/mounts").read_text().splitlines()
    return [line for line in lines if str(folder) in line and " fuse" in line]


def test_the_runtime_on_the_instance_mounts_the_data_and_unmounts_it_at_its_end(cloud, job_spec):  # noqa: F811
    prefix = f"s3://{BUCKET}/mount-{uuid.uuid4().hex[:6]}"
    open_store(f"{prefix}/data").write_bytes("train/a.bin", b"x" * 1000)
    job_id = sdk.submit(str(job_spec(SPEC.format(store=prefix, data=f"{prefix}/data"))))
    loop = cloud.start_controller(job_id)
    try:
        wait_for(lambda: not loop.is_alive() or cloud.errors, 600, f"the controller to drive job {job_id} to its end")
        assert not cloud.errors, cloud.errors
        [instance] = cloud.instances.values()
        assert sdk.status(job_id)["state"] == "completed", instance.boot_log[-3000:]
        kinds = {e["kind"]: e["data"] for e in sdk.events(job_id)}
        assert kinds["data_mounted"]["tool"] == "rclone", kinds
        assert kinds["data_mounted"]["path"].startswith(str(instance.folder))
        assert "data_synced" not in kinds and "data_mount_fallback" not in kinds
        assert "could not install rclone" not in instance.boot_log  # the image (here: the host) has it
        assert _fuse_mounts_under(cloud.folder) == []  # the runtime unmounted it as it ended
    finally:
        for line in _fuse_mounts_under(cloud.folder):  # a failed run leaves no mount behind on this machine
            subprocess.run(["fusermount3", "-u", line.split()[1]], check=False)
