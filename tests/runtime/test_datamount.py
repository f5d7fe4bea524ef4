"""`data.mode: mount`: the data mounted read-only with a FUSE tool, or copied after one event where it cannot be.

The fallback runs for real: a `/dev/fuse` that does not exist, a `file://` source, no tool on `PATH`.
The mount itself needs `/dev/fuse` and rclone or mount-s3; it is skipped, with the reason, where
either is missing: it mounts a SeaweedFS bucket and reads a file through the mount.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from spotfit.attempt.config import RuntimeConfig
from spotfit.runtime import datamount
from spotfit.runtime.job_data import sync_job_data
from spotfit.stores import open_store
from tests.support.seaweed import BUCKET


class _Reporter:
    def __init__(self):
        self.events, self.state = [], {}

    def progress(self, force=False, **fields):
        self.state.update(fields)

    def timing(self, name, seconds):
        pass

    def event(self, kind, message, **data):
        self.events.append((kind, message, data))


def _config(source: str, cache: str) -> RuntimeConfig:
    return RuntimeConfig(job_id="j", job_url="memory://j", script="t.py", workdir=".", data_source=source,
                         data_cache_dir=cache, data_mode="mount")


@pytest.fixture
def dataset(tmp_path) -> str:
    url = f"file://{tmp_path}/dataset"
    open_store(url).write_bytes("train/a.bin", b"abc")
    return url


def test_without_fuse_the_data_is_copied_after_one_event_saying_why(dataset, tmp_path, monkeypatch):
    monkeypatch.delenv("SPOTFIT_DATA_DIR", raising=False)
    monkeypatch.setattr(datamount, "FUSE_DEVICE", str(tmp_path / "no-fuse"))
    rep = _Reporter()
    stats = sync_job_data(_config(dataset, str(tmp_path / "cache")), rep)
    [(kind, message, data), (synced, _, _)] = rep.events
    assert kind == "data_mount_fallback" and "no-fuse does not exist (FUSE is not allowed here)" in data["reason"]
    assert message.endswith("copying it instead") and synced == "data_synced"
    assert os.environ["SPOTFIT_DATA_DIR"] == stats.path
    assert open(f"{stats.path}/train/a.bin", "rb").read() == b"abc"


def test_what_is_not_mounted_says_why(tmp_path, monkeypatch):
    cache = tmp_path / "c"
    assert datamount.mount_command("file:///data", tmp_path / "m", cache, None) == \
        "a file:// source is not mounted (s3:// and gs:// are)"
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert datamount.mount_command("s3://b/p", tmp_path / "m", cache, None) == \
        "neither rclone nor mount-s3 is installed"


def test_mount_s3_is_preferred_for_s3_and_rclone_keeps_a_bounded_full_vfs_cache(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("rclone", "mount-s3"):
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("SPOTFIT_S3_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8333")
    m, c = tmp_path / "m", tmp_path / "c"
    assert datamount.mount_command("s3://bkt/data/x", m, c, None) == [
        "mount-s3", "bkt", str(m), "--read-only", "--foreground", "--cache", str(c), "--prefix", "data/x/",
        "--endpoint-url", "http://127.0.0.1:8333", "--force-path-style"]
    rclone = datamount.mount_command("gs://bkt/data", m, c, 2.5)
    assert rclone[:4] == ["rclone", "mount", ":gcs,env_auth=true:bkt/data", str(m)]
    assert "--read-only" in rclone and rclone[rclone.index("--vfs-cache-mode") + 1] == "full"
    assert rclone[rclone.index("--vfs-cache-max-size") + 1] == "2560M"
    (bin_dir / "mount-s3").unlink()
    s3 = datamount.mount_command("s3://bkt/data", m, c, None)
    assert s3[2] == ":s3,provider=Other,env_auth=true,endpoint='http://127.0.0.1:8333',force_path_style=true:bkt/data"
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    assert datamount.mount_command("s3://bkt/data", m, c, None)[2] == ":s3,provider=AWS,env_auth=true:bkt/data"


_NO_FUSE = datamount.fuse_problem()
_NO_TOOL = None if shutil.which("rclone") or shutil.which("mount-s3") else "neither rclone nor mount-s3 is installed"


@pytest.mark.skipif(bool(_NO_FUSE or _NO_TOOL), reason=f"cannot mount here: {_NO_FUSE or _NO_TOOL}")
def test_a_seaweedfs_bucket_is_mounted_read_only_and_read_through_the_mount(s3_env, tmp_path, monkeypatch):
    s3_env.make_bucket(BUCKET)
    source = f"s3://{BUCKET}/mount-{uuid.uuid4().hex[:6]}"
    open_store(source).write_bytes("train/a.bin", b"through fuse")
    monkeypatch.delenv("SPOTFIT_DATA_DIR", raising=False)
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)  # a proxy's CA for https; rclone refuses it with plain http
    rep = _Reporter()
    assert sync_job_data(_config(source, str(tmp_path / "cache")), rep) is None, rep.events
    [(kind, _, data)] = rep.events
    assert kind == "data_mounted", rep.events
    folder = os.environ["SPOTFIT_DATA_DIR"]
    try:
        assert open(f"{folder}/train/a.bin", "rb").read() == b"through fuse"
        with pytest.raises(OSError):
            open(f"{folder}/train/new.bin", "wb").write(b"x")
    finally:
        datamount.unmount(Path(data["path"]))
    assert not os.path.ismount(data["path"]) and datamount._MOUNTED == {}
