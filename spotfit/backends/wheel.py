"""A wheel of the running spotfit: what an instance installs, so it runs exactly this code.

No package index is involved. `running_wheel()` packs the files of the imported `spotfit`
package (every file under its folder, without `__pycache__`) into a pure-Python wheel whose
version carries a hash of that content (`0.1.0+g<12 hex>`): two controllers with the same code
build byte-identical wheels, and a changed file gives another name. Dependencies and extras
come from the `pyproject.toml` beside the package when spotfit runs from its source tree, else
from the installed distribution's metadata.

Building it reads the package's few hundred kilobytes and takes milliseconds, so it is built in
memory once per process (`functools.cache`) and uploaded to a store's cache only when that
store lacks that name (`ship_wheel`). The AWS boot script and the Kubernetes pod both install it
from there: `<store>/cache/wheels/<filename>`, a URL that follows from the content alone, so a
dry run names the same URL a launch uploads to (`shipped_wheel_url`).

Example:

>>> w = running_wheel()
>>> w.filename.startswith("spotfit-") and w.filename.endswith("-py3-none-any.whl")
True
>>> w.filename == running_wheel().filename  # cached, and deterministic
True
>>> shipped_wheel_url("s3://b/p/jobs/j1") == f"s3://b/p/cache/wheels/{w.filename}"
True
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import tomllib
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from spotfit import version
from spotfit.stores import child, open_store
from spotfit.stores.base import ObjectStore

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: the same bytes whenever it is built


@dataclass(frozen=True)
class Wheel:
    """A built wheel: its file name (with the content-hash version) and bytes."""

    filename: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@functools.cache
def running_wheel() -> Wheel:
    """The wheel of the `spotfit` package this process imported (built once per process)."""
    package = Path(version.__file__).resolve().parent
    files = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix != ".pyc")
    contents = {f"spotfit/{p.relative_to(package).as_posix()}": p.read_bytes() for p in files}
    requires_python, requires = _requirements(package.parent)
    digest = hashlib.sha256()
    for name, data in contents.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    digest.update("\n".join(requires).encode())
    release = f"{version.__version__}+g{digest.hexdigest()[:12]}"
    return Wheel(f"spotfit-{release}-py3-none-any.whl", _pack(contents, release, requires_python, requires))


def cache_root(job_url: str) -> str:
    """`s3://b/p/jobs/j1` -> `s3://b/p/cache` (the job's own prefix when it is not under `jobs/`)."""
    head, sep, _ = job_url.rstrip("/").rpartition("/jobs/")
    return child(head if sep else job_url, "cache")


def shipped_wheel_url(job_url: str) -> str:
    """Where the running wheel lies in the cache of `job_url`'s store (pure: no upload)."""
    return child(cache_root(job_url), "wheels", running_wheel().filename)


def ship_wheel(job_url: str) -> str:
    """Upload the running wheel to the cache of `job_url`'s store unless it is there; its URL."""
    put_wheel(open_store(cache_root(job_url)))
    return shipped_wheel_url(job_url)


def put_wheel(cache: ObjectStore) -> None:
    """Write the running wheel under `wheels/` of the store cache `cache` unless it is there (once per content)."""
    key = f"wheels/{running_wheel().filename}"
    if not cache.exists(key):
        cache.write_bytes(key, running_wheel().data)


def _requirements(source_root: Path) -> tuple[str, list[str]]:
    """(Requires-Python, Requires-Dist lines with extras markers) of this spotfit."""
    pyproject = source_root / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        if project.get("name") == "spotfit":
            lines = list(project.get("dependencies", []))
            for extra, reqs in sorted(project.get("optional-dependencies", {}).items()):
                lines += [f'{req}; extra == "{extra}"' for req in reqs]
            return project.get("requires-python", ""), lines
    meta = metadata.metadata("spotfit")
    return meta["Requires-Python"] or "", list(meta.get_all("Requires-Dist") or [])


def _pack(contents: dict[str, bytes], version: str, requires_python: str, requires: list[str]) -> bytes:
    dist_info = f"spotfit-{version}.dist-info"
    extras = sorted({r.split('extra == "', 1)[1].rstrip('"') for r in requires if 'extra == "' in r})
    meta = ["Metadata-Version: 2.1", "Name: spotfit", f"Version: {version}"]
    meta += [f"Requires-Python: {requires_python}"] if requires_python else []
    meta += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    files = dict(contents)
    files[f"{dist_info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: spotfit\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist_info}/entry_points.txt"] = b"[console_scripts]\nspotfit = spotfit.cli:main\n"
    record = [f"{name},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}" for name, data in files.items()]
    files[f"{dist_info}/RECORD"] = ("\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
