"""`data.mode: mount`: the dataset mounted read-only with a FUSE tool instead of copied (the runtime's side).

For data larger than the disk. `mount_job_data` mounts `data.source` at `<cache>/mounts/<source hash>`
with the first tool found:

- `mount-s3` (Mountpoint for Amazon S3) for an `s3://` source: `--read-only`, its local cache in
  `<cache>/mount-cache`;
- else `rclone mount` (`s3://` and `gs://`): `--read-only --vfs-cache-mode full`, its VFS cache in
  `<cache>/mount-cache`, bounded by `data.cache_limit_gib`; credentials from the environment
  (`env_auth`) and, on S3, the stores' endpoint (`SPOTFIT_S3_ENDPOINT_URL`, else `AWS_ENDPOINT_URL_S3`
  or `AWS_ENDPOINT_URL`).

`SPOTFIT_DATA_DIR` then points at the mount, and a `data_mounted` event says with which tool (and the
`seconds` until the mount answered). Where
that cannot work (no `/dev/fuse`, or it cannot be opened; neither tool installed; a `file://` or
`memory://` source; the mount not up within `MOUNT_TIMEOUT_S`), the runtime copies the data as in
copy mode, after one `data_mount_fallback` event that says why. The mount is undone when the runtime
exits.

Example (this machine's answer varies, so it is not checked):

>>> fuse_problem()  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import time
from pathlib import Path

MOUNT_TIMEOUT_S = 60.0
FUSE_DEVICE = "/dev/fuse"
_MOUNTED: dict[str, subprocess.Popen] = {}  # mount point -> the tool's process, which serves it


def fuse_problem(device: str | None = None) -> str | None:
    """Why FUSE cannot be used here, or None when `device` (default `FUSE_DEVICE`) opens."""
    device = device or FUSE_DEVICE
    if not os.path.exists(device):
        return f"{device} does not exist (FUSE is not allowed here)"
    try:
        os.close(os.open(device, os.O_RDWR))
    except OSError as exc:
        return f"{device} cannot be opened ({exc.strerror})"
    return None


def s3_endpoint() -> str | None:
    """The S3 endpoint the stores use (fsspec_store.s3_options): `SPOTFIT_S3_ENDPOINT_URL`, else AWS's variables."""
    env = os.environ
    return env.get("SPOTFIT_S3_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")


def mount_command(source: str, target: Path, cache: Path, limit_gib: float | None) -> list[str] | str:
    """The command that mounts `source` at `target`, or why there is none."""
    scheme, _, rest = source.rstrip("/").partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme not in ("s3", "gs"):
        return f"a {scheme}:// source is not mounted (s3:// and gs:// are)"
    if scheme == "s3" and shutil.which("mount-s3"):
        cmd = ["mount-s3", bucket, str(target), "--read-only", "--foreground", "--cache", str(cache)]
        endpoint = s3_endpoint()
        return (cmd + (["--prefix", f"{prefix}/"] if prefix else [])
                + (["--endpoint-url", endpoint, "--force-path-style"] if endpoint else []))
    if not shutil.which("rclone"):
        return "neither rclone nor mount-s3 is installed"
    remote = {"s3": ":s3,provider=AWS,env_auth=true", "gs": ":gcs,env_auth=true"}[scheme]
    endpoint = s3_endpoint()
    if scheme == "s3" and endpoint:  # an S3-compatible server: addressed by path, not by a bucket host name
        remote = f":s3,provider=Other,env_auth=true,endpoint='{endpoint}',force_path_style=true"
    cmd = ["rclone", "mount", f"{remote}:{bucket}/{prefix}", str(target), "--read-only",
           "--vfs-cache-mode", "full", "--cache-dir", str(cache), "--dir-cache-time", "1h"]
    return cmd + (["--vfs-cache-max-size", f"{int(limit_gib * 1024)}M"] if limit_gib else [])


def mount(source: str, root: Path, limit_gib: float | None = None,
          timeout_s: float = MOUNT_TIMEOUT_S) -> tuple[Path | None, str]:
    """Mount `source` under `root`: (the mount point, the tool) or (None, why not)."""
    import hashlib

    problem = fuse_problem()
    if problem:
        return None, problem
    target = root / "mounts" / hashlib.sha256(source.rstrip("/").encode()).hexdigest()[:16]
    cache = root / "mount-cache"
    for folder in (target, cache):
        folder.mkdir(parents=True, exist_ok=True)
    cmd = mount_command(source, target, cache, limit_gib)
    if isinstance(cmd, str):
        return None, cmd
    # In the foreground, as a child: its own daemon mode waits up to a minute for a readiness signal
    # that some containers never deliver (rclone 1.60), and a child can be ended when the mount fails.
    log = root / "mount.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and not os.path.ismount(target) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not os.path.ismount(target):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            return None, f"{cmd[0]} did not mount {source} within {timeout_s:.0f}s"
        detail = log.read_text(errors="replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return None, f"{cmd[0]} could not mount {source}: {detail[0][:300]}"
    _MOUNTED[str(target)] = proc
    atexit.register(unmount, target)
    return target, cmd[0]


def unmount(target: Path) -> None:
    """Undo a mount, which ends the tool's process (quietly: at exit, a failure has no one to tell)."""
    proc = _MOUNTED.pop(str(target), None)
    if proc is None:
        return
    for cmd in (["fusermount3", "-u", str(target)], ["fusermount", "-u", str(target)], ["umount", str(target)]):
        if shutil.which(cmd[0]) and subprocess.run(cmd, capture_output=True).returncode == 0:
            break
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def unmount_all() -> None:
    """Undo every mount this process made (the runtime ends with `os._exit`, which skips `atexit`)."""
    for target in list(_MOUNTED):
        unmount(Path(target))


def mount_job_data(config, reporter, root: Path) -> bool:
    """Mount `config.data_source` and export `SPOTFIT_DATA_DIR`; False (after one event) to copy instead."""
    from spotfit.host.home import DATA_DIR_ENV

    started = time.monotonic()
    target, how = mount(config.data_source, root, config.data_cache_limit_gib)
    if target is None:
        reporter.event("data_mount_fallback", f"data {config.data_source}: not mounted ({how}); copying it instead",
                       source=config.data_source, reason=how)
        return False
    os.environ[DATA_DIR_ENV] = str(target)
    reporter.event("data_mounted", f"data {config.data_source}: mounted read-only at {target} with {how}",
                   source=config.data_source, path=str(target), tool=how,
                   seconds=round(time.monotonic() - started, 3))  # until the mount answered
    return True
