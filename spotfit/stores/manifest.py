"""The content manifest of a dataset: one digest that changes when any object under a prefix does.

Each object counts by its key, its size and its content tag (the store's ETag; the mtime where a
store has none, as the data cache tells versions apart, stores/datacache.py). Two listings of
unchanged content give the same digest, in any order; the AWS data snapshots are keyed by it
(backends/aws/snapshots.py), so two jobs naming the same data at the same content share one.

Example:

>>> from spotfit.stores.base import ObjectInfo
>>> a, b = ObjectInfo("x", 3, "e1"), ObjectInfo("y", 4, "e2")
>>> manifest_digest([a, b]) == manifest_digest([b, a]) != manifest_digest([a])
True
>>> len(manifest_digest([]))
32
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from spotfit.stores.base import ObjectInfo


@dataclass(frozen=True)
class Manifest:
    """What a listing of a dataset says: its digest, its size, how many objects."""

    digest: str
    bytes_total: int
    files: int


def manifest_digest(infos: Iterable[ObjectInfo]) -> str:
    """sha256 (32 hex digits) over the sorted `key, size, tag` lines of the objects."""
    lines = sorted(f"{i.key}\t{i.size}\t{i.etag if i.etag is not None else i.mtime}" for i in infos)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


def dataset_manifest(source: str) -> Manifest:
    """List every object under the store URL `source` and return its `Manifest`."""
    from spotfit.stores import open_store

    infos = list(open_store(source.rstrip("/")).list_info(""))
    return Manifest(manifest_digest(infos), sum(i.size for i in infos), len(infos))
