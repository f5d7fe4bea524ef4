"""The object store contract: a handful of methods that everything else is built on.

A store is addressed by a URL (`file:///tmp/x`, `memory://bucket/x`, `s3://bucket/prefix`).
Keys are `/`-separated paths relative to the store's root. Writes of a single object are
all-or-nothing: a reader never sees half an object (local files are written under a
temporary name, then renamed; S3 PUTs are atomic by nature). Multi-object protocols such as
checkpoints build on that by writing their manifest last.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ObjectStore(Protocol):
    """What spotfit needs from object storage."""

    url: str

    def read_bytes(self, key: str) -> bytes:
        """Return the object's content; raise `NotFoundError` if it does not exist."""

    def write_bytes(self, key: str, data: bytes) -> None:
        """Create or replace the object, atomically."""

    def exists(self, key: str) -> bool:
        """Whether the object exists."""

    def list(self, prefix: str = "") -> list[str]:
        """Keys of all objects under `prefix` (recursive), sorted."""

    def delete(self, key: str) -> None:
        """Remove one object; missing objects are ignored."""

    def get_file(self, key: str, local_path: str) -> None:
        """Download an object to a local file."""

    def put_file(self, local_path: str, key: str) -> None:
        """Upload a local file as an object."""
