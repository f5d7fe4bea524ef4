"""A local, content-addressed cache of a dataset kept in object storage.

`DataCache(root).sync("s3://bucket/prefix")` makes every object under the prefix available as
a local file and returns `SyncStats` with the local folder (`stats.path`) and byte counters.
Training reads that folder; a second sync of the same, unchanged dataset downloads nothing.

Layout under `root`:

- `blobs/<id[-2:]>/<id>`: one file per distinct content. The id comes from the store's tag:
  `md5-<etag>` for a single-part S3 ETag (the md5 of the content, verified on download),
  `etag-<hash>` for other tags (multipart ETags, GCS), and `sha256-<hex>` computed while
  downloading for stores without tags (file://, memory://). Same content, one blob.
- `views/<source hash>/<key>`: symlinks to blobs, the folder the script reads.
- `index/<source hash>.json`: what each key was at the last sync (size, tag, mtime, blob), so
  that a store without tags is not re-read to learn that nothing changed.
- `partial/<id>.part`: downloads in progress; an interrupted sync continues where it stopped.

Downloads run in parallel (`workers` threads, one object each, read in `chunk_bytes` ranges).
With `limit_bytes`, least-recently-used blobs that the dataset being synced does not need are
evicted before downloading; blobs are "used" when a sync references them (their mtime).

Example:

>>> import tempfile
>>> from spotfit.stores import open_store
>>> open_store("memory://datacache-doc").write_bytes("train/a.bin", b"abc")
>>> cache = DataCache(tempfile.mkdtemp())
>>> first, second = cache.sync("memory://datacache-doc"), cache.sync("memory://datacache-doc")
>>> first.bytes_downloaded, second.bytes_downloaded, second.hits
(3, 0, 1)
>>> open(f"{second.path}/train/a.bin", "rb").read()
b'abc'
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotfit.errors import StoreError, UsageError
from spotfit.stores import ObjectInfo, ObjectStore, open_store

if TYPE_CHECKING:
    from concurrent.futures import Future
    from types import TracebackType

    from rich.progress import Progress

CHUNK_BYTES = 8 * 2**20
# "etag": size, and every range read pinned to the listed ETag (If-Match) where the store can;
# "md5": also the content's md5 against a single-part ETag (costs CPU, see docs/benchmarks.md).
VERIFY_MODES = ("etag", "md5")
_MD5 = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class SyncStats:
    """What one sync did; `bytes_downloaded` counts bytes fetched from the store."""

    source: str
    path: str
    files: int = 0
    bytes_total: int = 0
    hits: int = 0
    bytes_hit: int = 0
    downloaded: int = 0
    bytes_downloaded: int = 0
    bytes_resumed: int = 0  # already on disk from an interrupted sync
    evicted: int = 0
    bytes_evicted: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _digest(text: str, n: int = 40) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _tag_id(info: ObjectInfo) -> str | None:
    """The blob id that the store's tag gives, or None when the content must be hashed."""
    if info.etag is None:
        return None
    etag = info.etag.lower()
    return f"md5-{etag}" if _MD5.match(etag) else f"etag-{_digest(f'{etag}:{info.size}')}"


def _safe_key(key: str) -> str:
    parts = key.split("/")
    if key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise StoreError(f"Refusing to cache object {key!r}: its key is not a plain relative path.")
    return key


class DataCache:
    """A content-addressed cache folder with an optional size limit."""

    def __init__(self, root: str | os.PathLike[str], limit_bytes: int | None = None, workers: int = 16,
                 chunk_bytes: int = CHUNK_BYTES, verify: str = "etag") -> None:
        if verify not in VERIFY_MODES:
            raise ValueError(f"verify must be one of {VERIFY_MODES}, received {verify!r}")
        self.verify = verify
        self.root = Path(root).expanduser().resolve()
        self.limit_bytes = limit_bytes
        self.workers = max(1, workers)
        self.chunk_bytes = chunk_bytes
        for sub in ("blobs", "views", "index", "partial"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    # -- public -----------------------------------------------------------------------------

    def view_path(self, source: str) -> Path:
        """The local folder that mirrors `source`."""
        return self.root / "views" / _digest(source.rstrip("/"), 16)

    def usage_bytes(self) -> int:
        """Bytes held in blobs."""
        return sum(size for _, size, _ in self._blobs())

    def sync(self, source: str, progress: bool | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> SyncStats:
        """Mirror every object under `source` into the cache; return what it took."""
        t0 = time.perf_counter()
        source = source.rstrip("/")
        store = open_store(source)
        stats = SyncStats(source=source, path=str(self.view_path(source)))
        with self._exclusive():
            infos = [i for i in store.list_info("") if _safe_key(i.key)]
            index = self._read_index(source)
            plan = {i.key: self._known_blob(i, index.get(i.key)) for i in infos}
            stats.files, stats.bytes_total = len(infos), sum(i.size for i in infos)
            misses = [i for i in infos if plan[i.key] is None]
            stats.hits = len(infos) - len(misses)
            stats.bytes_hit = stats.bytes_total - sum(i.size for i in misses)
            wanted = {b for b in plan.values() if b}
            self._make_room(sum(i.size for i in misses), wanted, stats)
            done = [stats.bytes_hit]
            bar = _Bar(source, stats.bytes_total, done[0], progress)

            def fetched(n: int) -> None:
                with self._lock:
                    done[0] += n
                    bar.advance(n)
                    if on_progress:
                        on_progress(done[0], stats.bytes_total)

            jobs: dict[str, Future[str]] = {}
            try:
                with bar, ThreadPoolExecutor(self.workers) as pool:
                    by_content: dict[str | None, Future[str]] = {}
                    for i in sorted(misses, key=lambda i: -i.size):
                        tag = _tag_id(i)  # keys with the same content share one download
                        if tag is None or tag not in by_content:
                            job = pool.submit(self._download, store, i, fetched, stats)
                            by_content.setdefault(tag, job)
                        else:
                            fetched(i.size)
                        jobs[i.key] = job if tag is None else by_content[tag]
                    _collect(jobs, plan)
            finally:
                # What did arrive is remembered even when the sync failed: a retry resumes.
                stats.downloaded = len({id(j) for k, j in jobs.items() if plan[k] is not None})
                done_plan = {k: b for k, b in plan.items() if b is not None}
                for blob in set(done_plan.values()):
                    os.utime(self._blob_path(blob))  # least recently used = oldest mtime
                self._write_index(source, {i.key: {"size": i.size, "etag": i.etag, "mtime": i.mtime,
                                                   "blob": done_plan[i.key]} for i in infos if i.key in done_plan})
            self._write_view(source, done_plan)
        stats.seconds = time.perf_counter() - t0
        return stats

    # -- blobs --------------------------------------------------------------------------------

    def _blob_path(self, blob: str) -> Path:
        return self.root / "blobs" / blob[-2:] / blob

    def _blobs(self) -> Iterator[tuple[Path, int, float]]:
        for path in (self.root / "blobs").glob("*/*"):
            st = path.stat()
            yield path, st.st_size, st.st_mtime

    def _known_blob(self, info: ObjectInfo, seen: dict[str, Any] | None) -> str | None:
        """The blob that already holds this object's content, if it is in the cache."""
        blob = _tag_id(info)
        if blob is None and seen and seen.get("size") == info.size and seen.get("mtime") == info.mtime:
            blob = seen.get("blob")
        if blob is None:
            return None
        path = self._blob_path(blob)
        return blob if path.is_file() and path.stat().st_size == info.size else None

    def _download(self, store: ObjectStore, info: ObjectInfo, fetched: Callable[[int], None],
                  stats: SyncStats) -> str:
        """Fetch one object into a blob (resuming a partial download); return the blob id."""
        blob = _tag_id(info)
        name = blob or "src-" + _digest(f"{store.url}/{info.key}:{info.size}:{info.mtime}")
        part = self.root / "partial" / f"{name}.part"
        for _try in (1, 2):
            offset = part.stat().st_size if part.exists() else 0
            if offset > info.size:
                part.unlink()
                offset = 0
            # Only the digest that verifies (md5 ETag, when asked) or names (no tag) the blob:
            # hashing costs CPU.
            content_check = self.verify == "md5" and blob is not None and blob.startswith("md5-")
            md5 = hashlib.md5() if content_check else _NoHash()
            sha = hashlib.sha256() if blob is None else _NoHash()
            if offset:
                with self._lock:
                    stats.bytes_resumed += offset
                fetched(offset)
                with open(part, "rb") as f:
                    for chunk in iter(lambda: f.read(self.chunk_bytes), b""):
                        md5.update(chunk)
                        sha.update(chunk)
            with open(part, "ab") as f:
                while offset < info.size:
                    end = min(offset + self.chunk_bytes, info.size)
                    # Pinning the listed version makes every range come from the same object.
                    data = (store.read_range(info.key, offset, end, etag=info.etag) if info.etag
                            else store.read_range(info.key, offset, end))
                    if not data:
                        break
                    f.write(data)
                    md5.update(data)
                    sha.update(data)
                    offset += len(data)
                    with self._lock:
                        stats.bytes_downloaded += len(data)
                    fetched(len(data))
            problem = self._verify(info, blob, offset, md5.hexdigest() if content_check else None)
            if problem is None:
                blob = blob or f"sha256-{sha.hexdigest()}"
                target = self._blob_path(blob)
                target.parent.mkdir(exist_ok=True)
                os.replace(part, target)
                return blob
            part.unlink(missing_ok=True)
            fetched(-offset)
        raise StoreError(f"Download of {info.key!r} from {store.url} failed verification twice: {problem}.")

    @staticmethod
    def _verify(info: ObjectInfo, blob: str | None, size: int, md5: str | None) -> str | None:
        if size != info.size:
            return f"got {size} bytes, the store lists {info.size}"
        if md5 is not None and blob != f"md5-{md5}":
            return f"md5 {md5} does not match the ETag {info.etag}"
        return None

    def _make_room(self, need: int, wanted: set[str], stats: SyncStats) -> None:
        """Evict least-recently-used blobs not in `wanted` until `need` more bytes fit."""
        if self.limit_bytes is None:
            return
        blobs = sorted(self._blobs(), key=lambda b: b[2])
        used = sum(size for _, size, _ in blobs)
        for path, size, _ in blobs:
            if used + need <= self.limit_bytes:
                break
            if path.name in wanted:
                continue
            path.unlink(missing_ok=True)
            used -= size
            stats.evicted += 1
            stats.bytes_evicted += size
        if used + need > self.limit_bytes:
            raise UsageError(
                f"Dataset {stats.source} needs {size_text(used + need)} of cache, more than "
                f"`data.cache_limit_gib` allows ({size_text(self.limit_bytes)}).",
                hint="Raise `data.cache_limit_gib` in the job spec, or point `data.cache_dir` at a larger disk.",
            )

    # -- views and index ---------------------------------------------------------------------

    def _write_view(self, source: str, plan: dict[str, str]) -> None:
        view = self.view_path(source)
        view.mkdir(parents=True, exist_ok=True)
        for key, blob in plan.items():
            link, target = view / key, self._blob_path(blob)
            if link.is_symlink() and os.readlink(link) == str(target):
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
            tmp.unlink(missing_ok=True)
            os.symlink(target, tmp)
            os.replace(tmp, link)
        for path in sorted(view.rglob("*"), reverse=True):  # deepest first: empty folders go too
            rel = path.relative_to(view).as_posix()
            if path.is_symlink() or path.is_file():
                if rel not in plan:
                    path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()

    def _index_path(self, source: str) -> Path:
        return self.root / "index" / f"{_digest(source, 16)}.json"

    def _read_index(self, source: str) -> dict[str, dict[str, Any]]:
        try:
            objects: dict[str, dict[str, Any]] = json.loads(self._index_path(source).read_text())["objects"]
            return objects
        except (OSError, ValueError, KeyError):
            return {}

    def _write_index(self, source: str, objects: dict[str, dict[str, Any]]) -> None:
        path = self._index_path(source)
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps({"source": source, "objects": objects}))
        os.replace(tmp, path)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One sync at a time per cache folder, across processes."""
        with open(self.root / "lock", "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def size_text(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} GiB"


def _collect(jobs: dict[str, Future[str]], plan: dict[str, str | None]) -> None:
    """Fill `plan` with the finished downloads; on the first failure cancel the rest, re-raise."""
    error = None
    for key, job in jobs.items():
        try:
            plan[key] = job.result()
        except Exception as exc:  # noqa: BLE001 — kept, the rest cancelled, then re-raised below
            if error is None:
                error = exc
                for other in jobs.values():
                    other.cancel()
    if error is not None:
        raise error


class _NoHash:
    def update(self, data: bytes) -> None:
        pass

    def hexdigest(self) -> str:
        return ""


class _Bar:
    """A rich progress bar on stderr (only on a terminal unless asked for)."""

    def __init__(self, source: str, total: int, done: int, show: bool | None) -> None:
        show = sys.stderr.isatty() if show is None else show
        self._progress: Progress | None = None
        if show:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(TextColumn("data {task.description}"), BarColumn(), DownloadColumn(),
                                      TransferSpeedColumn(), TimeRemainingColumn(),
                                      console=Console(stderr=True), transient=False)
            self._task = self._progress.add_task(source, total=total, completed=done)

    def __enter__(self) -> Progress | None:
        return (self._progress or nullcontext()).__enter__()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return (self._progress or nullcontext()).__exit__(exc_type, exc, tb)

    def advance(self, n: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)
