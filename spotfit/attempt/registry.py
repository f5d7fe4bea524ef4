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
from typing import TYPE_CHECKING, Any

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

    A version this job claimed before without publishing it (its attempt died mid-export: a claim,
    perhaps some files, no model card) is taken back first, emptied and returned, so a crash never
    leaves an orphan nor pushes the real export to the next number. Otherwise candidates start at
    `next_version`; a candidate another export claimed first is skipped.
    The claim holds a token of this call, so a claim whose reply was lost (and whose retry
    then found the key taken) is still recognized as this call's own.
    """
    token = json.dumps({"token": uuid.uuid4().hex, "job_id": job_id, "claimed_at": time.time()}).encode()
    unfinished = unfinished_claim(registry, name, job_id) if job_id else None
    if unfinished is not None:  # this job's export died there: the version is taken back, emptied, and redone
        for key in registry.list(f"{name}/{unfinished}/"):
            if not key.endswith(f"/{CLAIM}"):
                registry.delete(key)
        registry.write_bytes(f"{name}/{unfinished}/{CLAIM}", token)
        return unfinished
    version = next_version(registry, name)
    while True:
        key = f"{name}/{version}/{CLAIM}"
        if registry.create_exclusive(key, token) or registry.read_bytes(key) == token:
            return version
        version += 1


def unfinished_claim(registry: ObjectStore, name: str, job_id: str) -> int | None:
    """The lowest version of `name` that job `job_id` claimed and never published (no model card)."""
    keys: dict[int, set[str]] = {}
    for key in registry.list(name):
        parts = key.split("/")
        if len(parts) >= 3 and parts[1].isdigit():
            keys.setdefault(int(parts[1]), set()).add("/".join(parts[2:]))
    for version in sorted(v for v, files in keys.items() if CLAIM in files and CARD not in files):
        try:
            claim = json.loads(registry.read_bytes(f"{name}/{version}/{CLAIM}"))
        except ValueError:
            continue
        if isinstance(claim, dict) and claim.get("job_id") == job_id:
            return version
    return None


def published_by(registry: ObjectStore, name: str, job_id: str,
                 weights_sha256: str | None) -> dict[str, Any] | None:
    """The card of a version of `name` that job `job_id` already published with these weights, if any
    (its attempt died after the card, before its result: the next attempt does not publish it twice)."""
    if weights_sha256 is None:
        return None
    for version in versions(registry, name):
        card: dict[str, Any] = json.loads(registry.read_bytes(f"{name}/{version}/{CARD}"))
        if card.get("job_id") == job_id and card.get("weights_sha256") == weights_sha256:
            return card
    return None
