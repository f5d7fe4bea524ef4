"""Object stores: `open_store(url)` returns an `ObjectStore` for file://, memory://, s3://, gs://."""

from __future__ import annotations

from typing import Any

from spotfit.stores.base import ObjectInfo, ObjectStore
from spotfit.stores.fsspec_store import FsspecStore
from spotfit.stores.retry import RetryPolicy

__all__ = ["ObjectInfo", "ObjectStore", "RetryPolicy", "open_store", "child"]


def open_store(url: str, **storage_options: Any) -> ObjectStore:
    """Open the store at `url` (a `file://`, `memory://`, `s3://` or `gs://` URL)."""
    return FsspecStore(url, **storage_options)


def child(url: str, *parts: str) -> str:
    """Join a store URL and key parts: `child("file:///s", "jobs", "j1")` -> `file:///s/jobs/j1`."""
    return "/".join([url.rstrip("/"), *[p.strip("/") for p in parts if p]])
