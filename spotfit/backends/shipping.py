"""What an instance needs besides the runtime: the script's folder and the attempt's settings.

Both travel through the job's store prefix (the instance reads it with its IAM role), never
through user-data:

- `code/<sha256>.tar.gz`: the script's folder (`RuntimeConfig.workdir`), without VCS folders,
  virtual environments and caches; the same content is uploaded once per job;
- `attempts/<n>/launch.json`: workdir, code key, the job's `env`, workers, worker port;
- `attempts/<n>/cluster.json` (several workers): the workers' private addresses, in launch
  order, from which each worker's agent builds its `TF_CONFIG`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from spotfit.attempt import layout
from spotfit.attempt.config import RuntimeConfig
from spotfit.errors import UsageError

if TYPE_CHECKING:
    from spotfit.stores.base import ObjectStore

MAX_CODE_BYTES = 64 * 2**20
_SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", "node_modules"}
_CREDENTIAL_VARS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}


def code_archive(folder: Path) -> bytes:
    """A reproducible .tar.gz of `folder` (sorted names, zero mtimes): same files, same bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for path in sorted(_files(folder)):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
    data = buf.getvalue()
    if len(data) > MAX_CODE_BYTES:
        raise UsageError(f"The script's folder {folder} packs to {len(data) / 2**20:.0f} MiB, expected at most "
                         f"{MAX_CODE_BYTES // 2**20} MiB: it is shipped to every instance.",
                         hint="Keep data out of the script's folder: read it from the object store instead.")
    return data


def _files(folder: Path) -> Iterator[Path]:
    for path in folder.iterdir():
        if path.is_dir() and not path.is_symlink():
            if path.name not in _SKIP_DIRS:
                yield from _files(path)
        elif path.is_file() and path.suffix != ".pyc":
            yield path


def check_env(env: dict[str, str]) -> None:
    """The job's env must not carry AWS credentials: instances get an IAM role instead."""
    bad = sorted(_CREDENTIAL_VARS & set(env))
    if bad:
        raise UsageError(f"Invalid `env`: received {', '.join(bad)}; AWS credentials are never shipped to "
                         "instances.", hint="Remove them and set `aws.iam_instance_profile` to a role "
                                            "that may read and write the job's bucket.")


def ship(store: ObjectStore, attempt: int, env: dict[str, str], workers: int, worker_port: int) -> dict[str, object]:
    """Upload the code (once) and write `attempts/<n>/launch.json`; returns that document."""
    check_env(env)
    config = RuntimeConfig.from_json(store.read_bytes(layout.runtime_config(attempt)).decode())
    workdir = Path(config.workdir)
    code_key = None
    if workdir.is_dir():
        data = code_archive(workdir)
        code_key = layout.code_archive(hashlib.sha256(data).hexdigest()[:32])
        if not store.exists(code_key):
            store.write_bytes(code_key, data)
    doc: dict[str, object] = {"workdir": str(workdir), "code_key": code_key, "env": dict(env), "workers": workers,
                              "worker_port": worker_port}
    store.write_bytes(layout.launch_file(attempt), json.dumps(doc, indent=2).encode())
    return doc


def write_cluster(store: ObjectStore, attempt: int, private_ips: list[str], worker_port: int) -> dict[str, list[str]]:
    """Record the workers' addresses (launch order: worker 0 is the chief)."""
    doc = {"ips": list(private_ips), "worker": [f"{ip}:{worker_port}" for ip in private_ips]}
    store.write_bytes(layout.cluster_file(attempt), json.dumps(doc, indent=2).encode())
    return doc
