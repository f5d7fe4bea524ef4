"""`ObjectStore` over fsspec: one class for every protocol fsspec knows.

Optional protocols load lazily: `s3://` needs s3fs (`pip install 'spotfit[s3]'`), `gs://`
needs gcsfs (`pip install 'spotfit[gcs]'`). A `file://` store writes each file 0600 and each
folder it makes 0700. S3 settings come from the environment
(`s3_options`), credentials only from the environment or the usual AWS files. Every call is
retried with backoff (`retry.RetryPolicy`); failures surface as `StoreError`, missing objects
as `NotFoundError`.

Example:

>>> store = FsspecStore("memory://doctest")
>>> store.write_bytes("a/b.txt", b"hi")
>>> store.read_bytes("a/b.txt"), store.list("a"), store.info("a/b.txt").size
(b'hi', ['a/b.txt'], 2)
"""

from __future__ import annotations

import builtins
import os
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import fsspec

from spotfit.errors import NotFoundError, StoreError, UsageError
from spotfit.stores.base import ObjectInfo
from spotfit.stores.retry import RetryPolicy
from spotfit.stores.s3_reader import range_reader

# protocol -> (pip extra, import name): shown when the optional package is missing.
_INSTALL_HINTS = {"s3": ("s3", "s3fs"), "gs": ("gcs", "gcsfs"), "gcs": ("gcs", "gcsfs")}
# Errors no retry can mend; `StoreError` is one spotfit raised on purpose (an object changed).
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, ValueError, TypeError,
              StoreError)
_MEMORY_LOCK = threading.Lock()  # memory:// exclusive creates, one at a time in this process
T = TypeVar("T")


def _split(url: str) -> tuple[str, str]:
    if "://" not in url:
        raise UsageError(
            f"Invalid store URL: received {url!r}, expected `PROTOCOL://PATH`.",
            hint="Use e.g. `file:///home/me/spotfit-store` or `s3://bucket/prefix`.",
        )
    protocol, path = url.split("://", 1)
    return protocol, path


def s3_options(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """s3fs options from `SPOTFIT_S3_ENDPOINT_URL`, `SPOTFIT_S3_PROFILE`, `SPOTFIT_S3_REGION`.

    Unset ones are left to botocore, which reads `AWS_ENDPOINT_URL`, `AWS_PROFILE`,
    `AWS_DEFAULT_REGION` and `~/.aws/{config,credentials}` itself. Retries are spotfit's
    (`RetryPolicy`), so botocore makes one attempt per call.

    >>> s3_options({"SPOTFIT_S3_ENDPOINT_URL": "http://127.0.0.1:8333"})["endpoint_url"]
    'http://127.0.0.1:8333'
    """
    env = os.environ if environ is None else environ
    options: dict[str, Any] = {
        # Another process (the runtime, the controller) writes the same prefixes: no stale listings.
        "use_listings_cache": False,
        "config_kwargs": {"retries": {"max_attempts": 1, "mode": "standard"},
                          "connect_timeout": 5, "read_timeout": 60},
    }
    if env.get("SPOTFIT_S3_ENDPOINT_URL"):
        options["endpoint_url"] = env["SPOTFIT_S3_ENDPOINT_URL"]
    if env.get("SPOTFIT_S3_PROFILE"):
        options["profile"] = env["SPOTFIT_S3_PROFILE"]
    if env.get("SPOTFIT_S3_REGION"):
        options["client_kwargs"] = {"region_name": env["SPOTFIT_S3_REGION"]}
    return options


def _default_options(protocol: str) -> dict[str, Any]:
    return s3_options() if protocol in ("s3", "s3a") else {}


class FsspecStore:
    """An object store rooted at `url`, backed by an fsspec file system."""

    def __init__(self, url: str, retry: RetryPolicy | None = None, **storage_options: Any) -> None:
        protocol, _ = _split(url)
        options = {**_default_options(protocol), **storage_options}
        try:
            self.fs = fsspec.filesystem(protocol, **options)
        except (ImportError, ValueError) as exc:
            extra, module = _INSTALL_HINTS.get(protocol, (None, None))
            if extra is None:
                raise UsageError(
                    f"Unknown store protocol {protocol!r} in {url!r}: {exc}.",
                    hint="Use file://, memory://, s3:// or gs://.",
                ) from exc
            raise UsageError(
                f"Store {url!r} needs the package {module}, which is not installed.",
                hint=f"Install it with `pip install 'spotfit[{extra}]'`.",
            ) from exc
        if hasattr(self.fs, "retries"):
            self.fs.retries = 1  # s3fs's own loop: spotfit's RetryPolicy retries instead
        self.protocol = protocol
        self.retry = retry or RetryPolicy()
        self._ranges = range_reader(protocol, options, explicit=bool(storage_options))
        self.url = url.rstrip("/")
        # fsspec's own normal form of the root ("/name" for memory://, absolute for file://).
        self.root = self.fs._strip_protocol(url).rstrip("/")

    def _path(self, key: str) -> str:
        key = key.strip("/")
        return f"{self.root}/{key}" if key else self.root

    def _key(self, path: str) -> str:
        root = self.root + "/"
        return path[len(root):] if path.startswith(root) else path

    def _call(self, what: str, key: str, fn: Callable[[], T]) -> T:
        """Run one file-system call with retries; translate its errors."""
        try:
            return self.retry.call(fn, permanent=_PERMANENT)
        except FileNotFoundError as exc:
            raise NotFoundError(f"No object {key!r} in store {self.url}.") from exc
        except StoreError:
            raise
        except Exception as exc:
            # The message names the call and key only: never the credentials in the options.
            raise StoreError(f"Could not {what} {key!r} in {self.url}: {type(exc).__name__}: {exc}") from exc

    def read_bytes(self, key: str) -> bytes:
        return cast(bytes, self._call("read", key, lambda: self.fs.cat_file(self._path(key))))

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        ranges = self._ranges
        if ranges is not None:
            return self._call("read", key, lambda: ranges.read(self._path(key), start, end, etag))
        data: bytes = self._call("read", key, lambda: self.fs.cat_file(self._path(key), start=start, end=end))
        if etag is not None and self.protocol in ("gs", "gcs"):
            # gcsfs has no If-Match: the object's MD5 after the read tells whether it was the listed version.
            now = self.info(key).etag
            if now != etag:
                raise StoreError(f"{self._path(key)} changed while it was downloaded (ETag is no longer {etag}).",
                                 hint="Sync again: the cache lists the new version.")
        return data

    def write_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        if self.protocol == "file":
            self._call("write", key, lambda: _write_local(path, data))
        else:
            self._call("write", key, lambda: self.fs.pipe_file(path, data))

    def create_exclusive(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        if self.protocol == "file":
            return self._call("create", key, lambda: _create_local(path, data))
        if self.protocol == "memory":
            with _MEMORY_LOCK:  # a memory:// store lives in one process: the lock makes check-and-write atomic
                return self._call("create", key, lambda: _create_remote(self.fs, path, data))
        return self._call("create", key, lambda: _create_remote(self.fs, path, data))

    def exists(self, key: str) -> bool:
        return cast(bool, self._call("check", key, lambda: self.fs.exists(self._path(key))))

    def info(self, key: str) -> ObjectInfo:
        raw = self._call("stat", key, lambda: self.fs.info(self._path(key)))
        if raw.get("type") == "directory":
            raise NotFoundError(f"No object {key!r} in store {self.url}: it is a folder.")
        return _object_info(key.strip("/"), raw)

    def list(self, prefix: str = "") -> builtins.list[str]:
        return [i.key for i in self.list_info(prefix)]

    def list_info(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        base = self._path(prefix)

        def find() -> dict[str, dict[str, Any]]:
            try:
                return cast("dict[str, dict[str, Any]]", self.fs.find(base, detail=True))
            except FileNotFoundError:
                return {}

        found = self._call("list", prefix, find)
        # s3fs reports an empty prefix as a directory entry: objects only.
        infos = (_object_info(self._key(p), raw) for p, raw in found.items() if raw.get("type") != "directory")
        return sorted((i for i in infos if ".tmp-" not in i.key), key=lambda i: i.key)

    def delete(self, key: str) -> None:
        def rm() -> None:
            try:
                self.fs.rm_file(self._path(key))
            except FileNotFoundError:
                pass

        self._call("delete", key, rm)

    def get_file(self, key: str, local_path: str) -> None:
        self._call("download", key, lambda: self.fs.get_file(self._path(key), local_path))

    def put_file(self, local_path: str, key: str) -> None:
        if self.protocol == "file":
            with open(local_path, "rb") as f:
                self.write_bytes(key, f.read())
        else:
            self._call("upload", key, lambda: self.fs.put_file(local_path, self._path(key)))


def _write_local(path: str, data: bytes) -> None:
    """Write under a temporary name and rename: readers never see half a file."""
    tmp = _write_temp(path, data)
    try:
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _makedirs_private(folder: str) -> None:
    """`os.makedirs` with every folder it creates 0700 (its `mode` reaches the last one only)."""
    if os.path.isdir(folder):
        return
    _makedirs_private(os.path.dirname(folder))
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass


def _write_temp(path: str, data: bytes) -> str:
    """`data`, synced to disk, under a temporary name beside `path`; returns that name."""
    _makedirs_private(os.path.dirname(path))
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        # The owner's alone, whatever the umask of the process (a file:// store holds checkpoints and logs).
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return tmp


def _create_local(path: str, data: bytes) -> bool:
    """Write a temporary file, then hard-link it to `path`.

    `link` fails if `path` exists, atomically, as `open(O_CREAT | O_EXCL)` does; unlike that
    open, the file appears with its whole content, never empty or half written.
    """
    tmp = _write_temp(path, data)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(tmp)


def _md5_hex(md5_base64: str | None) -> str | None:
    """GCS's `md5Hash` (base64) as the hex digest S3 gives as a single-part ETag, so both read the same."""
    import base64
    import binascii

    if not md5_base64:
        return None
    try:
        return base64.b64decode(md5_base64, validate=True).hex()
    except (binascii.Error, ValueError):
        return None


def _create_remote(fs: Any, path: str, data: bytes) -> bool:
    """fsspec's exclusive write: `If-None-Match: *` on S3 (s3fs), `xb` in memory."""
    try:
        fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    except OSError as exc:
        from spotfit.stores.aws_errors import error_code

        # s3fs makes a FileExistsError only of AWS's reply, which names the condition; SeaweedFS
        # answers the same 412 PreconditionFailed without it, so s3fs passes an OSError on.
        if exc.__cause__ is not None and error_code(exc.__cause__) == "PreconditionFailed":
            return False
        raise
    return True


def _object_info(key: str, raw: dict[str, Any]) -> ObjectInfo:
    etag = raw.get("ETag") or _md5_hex(raw.get("md5Hash")) or raw.get("etag")
    mtime = raw.get("mtime") or raw.get("created") or raw.get("LastModified")
    if mtime is not None and hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    return ObjectInfo(key=key, size=int(raw.get("size") or 0),
                      etag=etag.strip('"') if isinstance(etag, str) else None,
                      mtime=float(mtime) if mtime is not None else None)
