"""The model registry's layout: what an attempt's export writes and `spotfit sweep`'s publish copies.

A model `name` has versions `<name>/<version>/`, numbered 1, 2, 3, ... A version number is
claimed before anything is uploaded under it, by creating `<version>/claim.json` only if absent
(`ObjectStore.create_exclusive`); its model card, `model_card.json`, is written last: a version
exists only once its card does (runtime/export.py explains the export, sweep/publish.py the copy).

>>> from spotfit.stores import open_store
>>> registry = open_store("memory://registry-doc")
>>> claim_version(registry, "m"), versions(registry, "m"), next_version(registry, "m")
(1, [], 2)
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spotfit.stores.base import ObjectStore

CARD = "model_card.json"
CLAIM = "claim.json"


def versions(registry: ObjectStore, name: str) -> list[int]:
    """Published versions of `name` (those with a model card), ascending."""
    out = set()
    for key in registry.list(name):
        parts = key.split("/")
        if len(parts) == 3 and parts[1].isdigit() and parts[2] == CARD:
            out.add(int(parts[1]))
    return sorted(out)


def next_version(registry: ObjectStore, name: str) -> int:
    """One above every version folder present (published or half-written)."""
    used = [int(k.split("/")[1]) for k in registry.list(name) if k.count("/") >= 2 and k.split("/")[1].isdigit()]
    return max(used, default=0) + 1


def claim_version(registry: ObjectStore, name: str, job_id: str | None = None) -> int:
    """The lowest version of `name` free from here on, claimed for this export alone.

    Candidates start at `next_version`; a candidate another export claimed first is skipped.
    The claim holds a token of this call, so a claim whose reply was lost (and whose retry
    then found the key taken) is still recognized as this call's own.
    """
    token = json.dumps({"token": uuid.uuid4().hex, "job_id": job_id, "claimed_at": time.time()}).encode()
    version = next_version(registry, name)
    while True:
        key = f"{name}/{version}/{CLAIM}"
        if registry.create_exclusive(key, token) or registry.read_bytes(key) == token:
            return version
        version += 1
