"""Where a job spec may make spotfit write on this host: each local path it names, inside allowed roots.

A spec names local paths in `checkpoint.store` and `export.registry` (`file://` URLs) and in
`data.cache_dir` (relative to the script's folder, where the local runtime runs). Each must
resolve, after `..` and every symlink, inside a root:

- a job run by its owner (`spotfit validate`, `spotfit run`, its own controller on the home's
  SQLite state): the home (`~`), `$SPOTFIT_HOME`, the spec's folder, and the folders listed
  in `paths.allow` of `$SPOTFIT_HOME/config.yaml`;
- a job a shared controller runs for whoever submitted it (`spotfit controller`, or any job on a
  shared state, `SPOTFIT_STATE_URL`): only the controller's own default folders
  (`$SPOTFIT_HOME/store`, `registry`, `cache`) and the folders in `paths.shared`, which the
  controller's owner opens to every submitter. The submitter's home and spec folder are not
  the controller's to write.

`spotfit validate` and `spotfit run` refuse anything else with one line that names the setting to
change; a shared controller checks again before it drives a job, its recorded store included
(a row written straight into a shared state never passed `validate`), and fails the job with
the same line.

Example:

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> roots = Roots((root,), "paths.allow", "the test's folder")
>>> roots.holds(root / "a" / "b"), roots.holds(root / ".." / "etc")
(True, False)
>>> local_path("file:///tmp/x/../../etc")
PosixPath('/etc')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spotfit.errors import SpecError

if TYPE_CHECKING:
    from spotfit.spec.job import JobSpec

DOCS = "docs/job-spec.md#where-a-spec-may-write"


@dataclass(frozen=True)
class Roots:
    """The folders local paths must resolve inside, the setting that adds more, and how to say them."""

    folders: tuple[Path, ...]
    setting: str  # `paths.allow` or `paths.shared`
    described: str  # "the home, $SPOTFIT_HOME, the spec's folder or paths.allow"

    def holds(self, path: Path) -> bool:
        real = Path(os.path.realpath(path))
        return any(real.is_relative_to(os.path.realpath(folder)) for folder in self.folders)


def owner_roots(spec_dir: str | Path) -> Roots:
    """The roots of a job run by its owner: the home, `$SPOTFIT_HOME`, the spec's folder and `paths.allow`."""
    from spotfit.host.home import home
    from spotfit.host.settings import load_settings

    allow = tuple(Path(p) for p in load_settings().paths.allow)
    return Roots((Path.home(), home(), Path(spec_dir), *allow), "paths.allow",
                 "the home, $SPOTFIT_HOME, the spec's folder or a folder in `paths.allow`")


def shared_roots() -> Roots:
    """The roots of a job a shared controller runs: its own default folders and `paths.shared`."""
    from spotfit.host.home import home
    from spotfit.host.settings import load_settings

    own = tuple(home() / name for name in ("store", "registry", "cache"))
    shared = tuple(Path(p) for p in load_settings().paths.shared)
    return Roots((*own, *shared), "paths.shared",
                 "$SPOTFIT_HOME/store, registry or cache, or a folder in `paths.shared` (a shared controller)")


def local_path(url: str) -> Path | None:
    """The local path a `file://` URL writes to, `..` normalized (symlinks are followed by `Roots.holds`);
    None for another store. ValueError for a relative one (`file://dir/x`), which fsspec would
    resolve against the working folder of whichever process opens it."""
    if not url.startswith("file://"):
        return None
    path = url[len("file://"):]  # as fsspec reads it: no percent-decoding, no host
    if not path.startswith("/"):
        raise ValueError("expected an absolute path, file:///PATH")
    return Path(os.path.normpath(path))


def named_paths(spec: JobSpec, source: str = "the job spec") -> list[tuple[str, str, Path | None]]:
    """(field, value, local path or None for another store) of each local path the spec names.

    `data.cache_dir` is relative to the script's folder, where the local runtime runs.
    """
    workdir = Path(spec.base_dir) if spec.is_notebook or spec.script is None else spec.script_path.parent
    out: list[tuple[str, str, Path | None]] = []
    registry = spec.export.registry if spec.export else None
    for field, url in (("checkpoint.store", spec.checkpoint.store), ("export.registry", registry)):
        if url is not None:
            out.append((field, url, _url_path(f"`{field}`", url, source)))
    if spec.data is not None and spec.data.cache_dir is not None:
        out.append(("data.cache_dir", spec.data.cache_dir, Path(os.path.normpath(workdir / spec.data.cache_dir))))
    return out


def _url_path(what: str, url: str, source: str) -> Path | None:
    try:
        return local_path(url)
    except ValueError as exc:
        raise SpecError(f"Invalid {what} in {source}: received {url[:120]!r}, {exc}.",
                        hint="Write the folder's absolute path after file://, e.g. file:///home/me/store.") from None


def check(spec: JobSpec, roots: Roots, source: str, job_url: str | None = None) -> None:
    """Raise one `SpecError` line for the first local path (of the spec, or the job's store `job_url`)
    outside `roots`."""
    found = [(f"`{field}`", value, path) for field, value, path in named_paths(spec, source)]
    if job_url is not None:
        found.append(("recorded store", job_url, _url_path("recorded store", job_url, source)))
    for what, value, path in found:
        if path is not None and not roots.holds(path):
            real = os.path.realpath(path)
            where = "" if value in (real, f"file://{real}") else f" (which resolves to {_middle(real)})"
            raise SpecError(
                f"Invalid {what} in {source}: received {_middle(value)!r}{where}, expected a folder "
                f"inside {roots.described}.",
                hint=f"Pick a folder inside those, or add this one to `{roots.setting}` in "
                     f"$SPOTFIT_HOME/config.yaml ({DOCS}).")


def _middle(text: str, limit: int = 96) -> str:
    """`text`, its middle cut out when longer than `limit`: both ends of a path say the most."""
    half = (limit - 1) // 2
    return text if len(text) <= limit else f"{text[:half]}…{text[-half:]}"
