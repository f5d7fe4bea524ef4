"""The object store contract: a handful of methods that everything else is built on.

A store is addressed by a URL (`file:///tmp/x`, `memory://bucket/x`, `s3://bucket/prefix`).
Keys are `/`-separated paths relative to the store's root. Writes of a single object are
all-or-nothing: a reader never sees half an object (local files are written under a
temporary name, then renamed; S3 PUTs are atomic by nature). Multi-object protocols such as
checkpoints build on that by writing their manifest last. `create_exclusive` creates an object
only if its key is free (`O_EXCL` semantics on files, `If-None-Match: *` on S3), which is how
concurrent writers claim a name, e.g. a registry version.

Errors: a missing object raises `NotFoundError`; anything else that goes wrong (server down,
permission denied) raises `StoreError`, after the store's own retries.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ObjectInfo:
    """One object: its key, size and the store's content tag.

    `etag` is the store's tag of the content (S3's ETag without quotes, GCS's md5), or None
    where the store has none (file://, memory://); `mtime` is then what tells versions apart.
    """

    key: str
    size: int
    etag: str | None = None
    mtime: float | None = None


@runtime_checkable
class ObjectStore(Protocol):
    """What spotfit needs from object storage."""

    url: str

    def read_bytes(self, key: str) -> bytes:
        """Return the object's content; raise `NotFoundError` if it does not exist."""

    def read_range(self, key: str, start: int, end: int, etag: str | None = None) -> bytes:
        """Return bytes `[start, end)` of the object (fewer at its end).

        With `etag`, stores that can (S3 through boto3) read only that version of the object
        (`If-Match`) and raise `StoreError` if it changed; others ignore it.
        """

    def write_bytes(self, key: str, data: bytes) -> None:
        """Create or replace the object, atomically."""

    def create_exclusive(self, key: str, data: bytes) -> bool:
        """Create the object only if no object has `key`; return whether this call created it.

        Atomic: of callers racing for one key exactly one gets True, and readers see the
        winner's whole content or nothing. A retry after a lost reply may answer False for an
        object this very call created: callers that must know put a unique token in `data`
        and compare what they read back.
        """

    def exists(self, key: str) -> bool:
        """Whether the object exists."""

    def info(self, key: str) -> ObjectInfo:
        """Size and content tag of one object; raise `NotFoundError` if it does not exist."""

    def list(self, prefix: str = "") -> builtins.list[str]:
        """Keys of all objects under `prefix` (recursive), sorted."""

    def list_info(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        """`ObjectInfo` of all objects under `prefix` (recursive), sorted by key."""

    def delete(self, key: str) -> None:
        """Remove one object; missing objects are ignored."""

    def get_file(self, key: str, local_path: str) -> None:
        """Download an object to a local file."""

    def put_file(self, local_path: str, key: str) -> None:
        """Upload a local file as an object."""
