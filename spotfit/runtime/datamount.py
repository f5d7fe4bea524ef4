"""`data.mode: mount`: the dataset mounted read-only with a FUSE tool instead of copied (the runtime's side).

For data larger than the disk. `mount_job_data` mounts `data.source` at `<cache>/mounts/<source hash>`
with the first tool found:

- `mount-s3` (Mountpoint for Amazon S3) for an `s3://` source: `--read-only`, its local cache in
  `<cache>/mount-cache`;
- else `rclone mount` (`s3://` and `gs://`): `--read-only --vfs-cache-mode full`, its VFS cache in
  `<cache>/mount-cache`, bounded by `data.cache_limit_gib`; credentials from the environment
  (`env_auth`) and, on S3, `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` as its endpoint.

`SPOTFIT_DATA_DIR` then points at the mount, and a `data_mounted` event says with which tool. Where
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


def mount_command(source: str, target: Path, cache: Path, limit_gib: float | None) -> list[str] | str:
    """The command that mounts `source` at `target`, or why there is none."""
    scheme, _, rest = source.rstrip("/").partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme not in ("s3", "gs"):
        return f"a {scheme}:// source is not mounted (s3:// and gs:// are)"
    if scheme == "s3" and shutil.which("mount-s3"):
        cmd = ["mount-s3", bucket, str(target), "--read-only", "--cache", str(cache)]
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return cmd + (["--prefix", f"{prefix}/"] if prefix else []) + (["--endpoint-url", endpoint] if endpoint else [])
    if not shutil.which("rclone"):
        return "neither rclone nor mount-s3 is installed"
    remote = {"s3": ":s3,provider=AWS,env_auth=true", "gs": ":gcs,env_auth=true"}[scheme]
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if scheme == "s3" and endpoint:
        remote += f",endpoint='{endpoint}'"
    cmd = ["rclone", "mount", f"{remote}:{bucket}/{prefix}", str(target), "--read-only", "--daemon",
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
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"{cmd[0]} did not return within {timeout_s:.0f}s"
    deadline = time.monotonic() + timeout_s
    while out.returncode == 0 and not os.path.ismount(target) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not os.path.ismount(target):
        detail = (out.stderr or out.stdout).strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        return None, f"{cmd[0]} could not mount {source}: {detail[0][:300]}"
    atexit.register(unmount, target)
    return target, cmd[0]


def unmount(target: Path) -> None:
    """Undo a mount (quietly: at exit, a failure has no one to tell)."""
    for cmd in (["fusermount", "-u", str(target)], ["fusermount3", "-u", str(target)], ["umount", str(target)]):
        if shutil.which(cmd[0]) and subprocess.run(cmd, capture_output=True).returncode == 0:
            return


def mount_job_data(config, reporter, root: Path) -> bool:
    """Mount `config.data_source` and export `SPOTFIT_DATA_DIR`; False (after one event) to copy instead."""
    from spotfit.home import DATA_DIR_ENV

    target, how = mount(config.data_source, root, config.data_cache_limit_gib)
    if target is None:
        reporter.event("data_mount_fallback", f"data {config.data_source}: not mounted ({how}); copying it instead",
                       source=config.data_source, reason=how)
        return False
    os.environ[DATA_DIR_ENV] = str(target)
    reporter.event("data_mounted", f"data {config.data_source}: mounted read-only at {target} with {how}",
                   source=config.data_source, path=str(target), tool=how)
    return True
