"""An emulated EC2 on 127.0.0.1 whose instances run their real user-data.

- **EC2, SSM, IAM, STS**: moto in server mode (`ThreadedMotoServer` on a loopback port); the
  controller reaches it through `AWS_ENDPOINT_URL_EC2/SSM/IAM/STS` (see `controller_env`), and an
  instance's agent reads the job's SSM parameters there too, as its instance role would.
- **S3**: SeaweedFS (the tests' `seaweed` fixture), for the job's store and the env cache.
- **IMDS**: one `ImdsServer` per instance (tests/support/imds.py).
- **The instance**: for each instance moto reports pending or running, the harness fetches its
  user-data (`DescribeInstanceAttribute userData`) and runs it in a sandbox folder of its own
  (tests/support/sandbox.py: `HOME`, `PATH` and the install root, `/opt/spotfit` on EC2,
  redirected; the image's `python3.11` and `shutdown` stood in for; pip offline), with
  `SPOTFIT_IMDS_URL` at its IMDS server and `aws` on its `PATH` (`aws s3 cp` against SeaweedFS
  with boto3). After `shutdown` the harness terminates the instance, as
  `InstanceInitiatedShutdownBehavior: terminate` does.
- **Data volumes** (`data.volume: snapshot`): folders, and their snapshots copies of them, with
  stand-ins for `lsblk`, `blkid`, `mkfs.ext4`, `mount` and `mountpoint` (tests/support/emulated_volumes.py).
- **Spot interruptions**: `interrupt(instance_id, notice_s)` publishes the notice in IMDS, takes
  the zone's spot capacity away (`RunInstances` there fails with InsufficientInstanceCapacity)
  and terminates the instance when the notice is over, if it has not powered off by then.
  `EmulatedAwsBackend` delivers the controller's injected preemptions (`market.preemptions`)
  this way instead of through `preempt.json`, so the runtime holds at an exact step and the
  interruption then takes the path a real one takes.

A terminated instance's processes are killed (the machine is gone). What this does not model:
boot time of a VM, a real Python 3.11 or TensorFlow install (the venv reuses the test venv's
packages), the instance profile (the sandbox gets SeaweedFS's keys in its environment), and
several instances on one private network.
"""

from __future__ import annotations

import base64
import logging
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3

from spotfit.backends.aws.backend import AwsBackend
from tests.support.aws_moto import REGION, fail_run_instances
from tests.support.emulated_volumes import EmulatedVolumes
from tests.support.imds import ImdsServer
from tests.support.sandbox import Harness, Machine, boot, kill, prepare
from tests.support.seaweed import SeaweedServer, seaweed_env

_AWS_STUB = """#!{python}
# Stands in for the AWS CLI: `aws s3 cp [--quiet] SRC DST`, SRC or DST an s3:// URL.
import os, sys
import boto3
import psutil
from botocore.exceptions import ClientError
args = [a for a in sys.argv[1:] if a != "--quiet"]
if args[:2] != ["s3", "cp"] or len(args) != 4:
    sys.exit(f"aws stub: unsupported command {{sys.argv[1:]}}")
src, dst = args[2:]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL_S3"])
def split(url):
    bucket, _, key = url[5:].partition("/")
    return bucket, key
try:
    if src.startswith("s3://"):
        if dst.endswith("/"):
            dst += src.rsplit("/", 1)[1]
        s3.download_file(*split(src), dst)
    else:
        s3.upload_file(src, *split(dst))
except ClientError as exc:
    sys.exit(f"fatal error: {{exc}}")
"""

@dataclass
class Instance(Machine):
    """One emulated instance: its sandbox, IMDS and the bash process running its user-data."""

    instance_id: str
    zone: str
    folder: Path
    imds: ImdsServer
    proc: subprocess.Popen
    booted_at: float
    ended: bool = False
    exit_code: int | None = None


@dataclass
class EmulatedCloud(Harness):
    """moto server + SeaweedFS + IMDS + sandboxes (see the module doc); `start()`, then `stop()`."""

    folder: Path
    seaweed: SeaweedServer
    instances: dict[str, Instance] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def start(self) -> EmulatedCloud:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per moto request otherwise
        port = _free_port()
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._moto.start()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.ec2 = boto3.client("ec2", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id="testing",
                                aws_secret_access_key="testing")
        self.session = boto3.Session(region_name=REGION)  # endpoints from controller_env()
        self.volumes = EmulatedVolumes(self.folder, self.ec2)
        self._start_harness()
        return self

    def controller_env(self) -> dict[str, str]:
        """The controller's environment: AWS APIs at moto, S3 at SeaweedFS, no metadata address."""
        return {**seaweed_env(self.seaweed), "AWS_DEFAULT_REGION": REGION,
                **{f"AWS_ENDPOINT_URL_{svc}": self.endpoint for svc in ("EC2", "SSM", "IAM", "STS")}}

    def backend(self) -> EmulatedAwsBackend:
        self._backend = EmulatedAwsBackend(self, session=self.session, cleanup_wait_s=60.0, poll_s=0.2)
        return self._backend

    def interrupt(self, instance_id: str, notice_s: float) -> None:
        """A spot interruption: notice in IMDS, capacity gone in the zone, termination after `notice_s`."""
        inst = self.instances[instance_id]
        fail_run_instances(self._backend.client("ec2", REGION), inst.zone)
        inst.imds.interrupt(notice_s)
        self._later(notice_s, self._reclaim, instance_id)

    def stop(self) -> None:
        self._stop_harness()
        for inst in self.instances.values():
            kill(inst.proc)
            inst.imds.stop()
        self._moto.stop()

    # -- the instances' side ----------------------------------------------------------------------

    def _tick(self) -> None:
        self.volumes.tick()
        pages = self.ec2.describe_instances(Filters=[{"Name": "tag:spotfit:managed", "Values": ["true"]}])
        for inst in (i for r in pages["Reservations"] for i in r["Instances"]):
            iid, state = inst["InstanceId"], inst["State"]["Name"]
            if state in ("pending", "running") and iid not in self.instances:
                self.instances[iid] = self._boot(inst)
            elif state in ("shutting-down", "terminated") and iid in self.instances:
                kill(self.instances[iid].proc)  # the machine is gone, and what ran on it
        for inst in self.instances.values():
            if not inst.ended and inst.proc.poll() is not None:
                inst.ended, inst.exit_code = True, inst.proc.returncode
                if inst.powered_off:
                    self._reclaim(inst.instance_id)

    def _reclaim(self, instance_id: str) -> None:
        state = self._state(instance_id)
        if state in ("pending", "running", "stopping", "stopped"):
            self.ec2.terminate_instances(InstanceIds=[instance_id])

    def _state(self, instance_id: str) -> str:
        pages = self.ec2.describe_instances(InstanceIds=[instance_id])
        return pages["Reservations"][0]["Instances"][0]["State"]["Name"]

    def _boot(self, inst: dict) -> Instance:
        iid, zone = inst["InstanceId"], inst["Placement"]["AvailabilityZone"]
        folder = self.folder / iid
        bin_dir = prepare(folder, {"aws": _AWS_STUB.format(python=sys.executable)})
        self.volumes.attach(iid, bin_dir, folder / "volume-state")
        attr = self.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
        imds = ImdsServer(iid, zone, inst.get("PrivateIpAddress", "10.0.0.1"))
        env = {**seaweed_env(self.seaweed), "SPOTFIT_IMDS_URL": imds.url, "AWS_ENDPOINT_URL_S3": self.seaweed.endpoint,
               "AWS_ENDPOINT_URL_SSM": self.endpoint,  # the job's secrets (and a notebook's token), as the role reads
               "AWS_ENDPOINT_URL_EC2": self.endpoint,  # the data volume's snapshot (data_fill.py)
               "GCE_METADATA_IP": "127.0.0.1:9", "GCE_METADATA_HOST": "127.0.0.1:9"}
        proc = boot(folder, "user-data", base64.b64decode(attr["UserData"]["Value"]), env, self.wheels)
        return Instance(iid, zone, folder, imds, proc, booted_at=time.time())


class EmulatedAwsBackend(AwsBackend):
    """The aws backend, except that an injected preemption arrives as EC2 delivers a spot interruption."""

    def __init__(self, cloud: EmulatedCloud, **kwargs):
        super().__init__(**kwargs)
        self.cloud = cloud

    def preempt(self, handle, notice_s: float) -> None:
        for instance_id in handle.instances:
            self.cloud.interrupt(instance_id, notice_s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
