"""`ObjectStore` over fsspec: one class for every protocol fsspec knows.

Optional protocols load lazily: `s3://` needs s3fs (`pip install 'spotfit[s3]'`), `gs://`
needs gcsfs (`pip install 'spotfit[gcs]'`).

Example:

>>> store = FsspecStore("memory://doctest")
>>> store.write_bytes("a/b.txt", b"hi")
>>> store.read_bytes("a/b.txt"), store.list("a")
(b'hi', ['a/b.txt'])
"""

from __future__ import annotations

import os
import uuid

import fsspec

from spotfit.errors import NotFoundError, StoreError, UsageError

# protocol -> (pip extra, import name): shown when the optional package is missing.
_INSTALL_HINTS = {"s3": ("s3", "s3fs"), "gs": ("gcs", "gcsfs"), "gcs": ("gcs", "gcsfs")}


def _split(url: str) -> tuple[str, str]:
    if "://" not in url:
        raise UsageError(
            f"Invalid store URL: received {url!r}, expected `PROTOCOL://PATH`.",
            hint="Use e.g. `file:///home/me/spotfit-store` or `s3://bucket/prefix`.",
        )
    protocol, path = url.split("://", 1)
    return protocol, path


class FsspecStore:
    """An object store rooted at `url`, backed by an fsspec file system."""

    def __init__(self, url: str, **storage_options):
        protocol, _ = _split(url)
        try:
            self.fs = fsspec.filesystem(protocol, **storage_options)
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
        self.protocol = protocol
        self.url = url.rstrip("/")
        # fsspec's own normal form of the root ("/name" for memory://, absolute for file://).
        self.root = self.fs._strip_protocol(url).rstrip("/")

    def _path(self, key: str) -> str:
        key = key.strip("/")
        return f"{self.root}/{key}" if key else self.root

    def read_bytes(self, key: str) -> bytes:
        try:
            return self.fs.cat_file(self._path(key))
        except FileNotFoundError as exc:
            raise NotFoundError(f"No object {key!r} in store {self.url}.") from exc
        except OSError as exc:
            raise StoreError(f"Could not read {key!r} from {self.url}: {exc}") from exc

    def write_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            if self.protocol == "file":
                # Local files are written under a temporary name and renamed: atomic.
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            else:
                self.fs.pipe_file(path, data)
        except OSError as exc:
            raise StoreError(f"Could not write {key!r} to {self.url}: {exc}") from exc

    def exists(self, key: str) -> bool:
        return self.fs.exists(self._path(key))

    def list(self, prefix: str = "") -> list[str]:
        base = self._path(prefix)
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        root = self.root + "/"
        keys = [p[len(root):] if p.startswith(root) else p for p in found]
        return sorted(k for k in keys if ".tmp-" not in k)

    def delete(self, key: str) -> None:
        try:
            self.fs.rm_file(self._path(key))
        except FileNotFoundError:
            pass

    def get_file(self, key: str, local_path: str) -> None:
        try:
            self.fs.get_file(self._path(key), local_path)
        except FileNotFoundError as exc:
            raise NotFoundError(f"No object {key!r} in store {self.url}.") from exc

    def put_file(self, local_path: str, key: str) -> None:
        if self.protocol == "file":
            with open(local_path, "rb") as f:
                self.write_bytes(key, f.read())
        else:
            self.fs.put_file(local_path, self._path(key))
