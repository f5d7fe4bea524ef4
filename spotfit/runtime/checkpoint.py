"""Atomic, verified checkpoints on any object store.

Layout under the job prefix: `checkpoints/<step>/state.npz` and, written last,
`checkpoints/<step>/manifest.json` with the sha256 and size of every file (`<step>` is the
job's global step, counted across the script's `fit` calls). A checkpoint exists
only when its manifest does (object stores have no rename), so a crash mid-save leaves at most
an orphan `state.npz` that restore ignores and the next prune removes. Restore verifies the
hashes and falls back to the previous checkpoint when the newest is corrupt. "Newest" is by
(`fit_index` in the manifest's meta, step), never by step alone. The same class, under another
prefix (`fit_calls/<n>/`), keeps the end state of each finished `fit` call (fit_calls.py).

Example:

>>> import numpy as np
>>> from spotfit.stores import open_store
>>> ckpts = CheckpointStore(open_store("memory://ckpt-doc"), keep=2)
>>> _ = ckpts.save(5, {"w": np.ones(3)}, {"epoch": 0})
>>> ckpts.load_latest().step
5
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from spotfit.attempt import layout
from spotfit.errors import NotFoundError
from spotfit.stores.base import ObjectStore

PREFIX = layout.CHECKPOINTS


@dataclass
class Checkpoint:
    step: int
    arrays: dict[str, np.ndarray]
    meta: dict
    save_s: float = 0.0
    skipped: list[str] = field(default_factory=list)  # corrupt newer checkpoints passed over


class CheckpointStore:
    """Save, verify, load and prune checkpoints under a store."""

    def __init__(self, store: ObjectStore, keep: int = 2, on_event: Callable[..., None] | None = None,
                 prefix: str = PREFIX):
        self.store = store
        self.keep = keep
        self.prefix = prefix
        self.on_event = on_event or (lambda kind, message, **data: None)

    def _key(self, step: int, name: str) -> str:
        return f"{self.prefix}/{step:012d}/{name}"

    def _step_of(self, key: str) -> tuple[int, str] | None:
        """(step, file name) of a key under this prefix, or None for anything else."""
        rest = key[len(self.prefix) + 1:].split("/") if key.startswith(self.prefix + "/") else []
        return (int(rest[0]), rest[1]) if len(rest) == 2 and rest[0].isdigit() else None

    def steps(self) -> list[int]:
        """Steps that have a manifest, oldest first."""
        out = set()
        for key in self.store.list(self.prefix):
            parsed = self._step_of(key)
            if parsed is not None and parsed[1] == "manifest.json":
                out.add(parsed[0])
        return sorted(out)

    def save(self, step: int, arrays: dict[str, np.ndarray], meta: dict) -> float:
        """Write a checkpoint (data first, manifest last); returns seconds taken."""
        t0 = time.perf_counter()
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy stubs mistype **kwds
        data = buf.getvalue()
        self.store.write_bytes(self._key(step, "state.npz"), data)
        manifest = {
            "step": step,
            "created_at": time.time(),
            "files": {"state.npz": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}},
            "meta": meta,
        }
        self.store.write_bytes(self._key(step, "manifest.json"), json.dumps(manifest).encode())
        self.prune()
        return time.perf_counter() - t0

    def prune(self) -> None:
        """Keep the newest `keep` checkpoints; remove older ones and orphans below them."""
        steps = self.steps()
        if len(steps) <= self.keep:
            return
        oldest_kept = steps[-self.keep]
        for key in self.store.list(self.prefix):
            parsed = self._step_of(key)
            # Manifest first: a half-pruned checkpoint must never look valid.
            if parsed is not None and parsed[0] < oldest_kept and parsed[1] == "manifest.json":
                self.store.delete(key)
        for key in self.store.list(self.prefix):
            parsed = self._step_of(key)
            if parsed is not None and parsed[0] < oldest_kept:
                self.store.delete(key)

    def load_latest(self) -> Checkpoint | None:
        """The newest checkpoint whose files match their manifest, or None."""
        skipped = []
        for step in self._newest_first():
            try:
                ckpt = self._load(step)
            except (NotFoundError, ValueError, KeyError, TypeError) as exc:
                # Missing or damaged data (a manifest that is not JSON, or JSON of another shape). A
                # store that cannot be reached (StoreError) is not a damaged checkpoint: it
                # propagates, so no good checkpoint is passed over.
                skipped.append(f"{step}: {exc}")
                self.on_event(
                    "checkpoint_corrupt",
                    f"checkpoint at step {step} is corrupt ({exc}); falling back to an older one",
                    step=step,
                )
                continue
            ckpt.skipped = skipped
            return ckpt
        return None

    def _newest_first(self) -> list[int]:
        """Steps ordered by (fit call, step), newest first.

        A manifest that cannot be read says nothing of its fit call: it is tried first, so that
        `load_latest` reports it as corrupt, rather than passed over without a word below the
        readable ones (fit calls count from 1).
        """
        order = []
        for step in self.steps():
            try:
                manifest = json.loads(self.store.read_bytes(self._key(step, "manifest.json")))
                fit_index = int(manifest["meta"].get("fit_index", 0))
            except (NotFoundError, ValueError, KeyError, TypeError, AttributeError):
                fit_index = sys.maxsize  # _load reports it as corrupt, first
            order.append((fit_index, step))
        return [step for _, step in sorted(order, reverse=True)]

    def _load(self, step: int) -> Checkpoint:
        manifest = json.loads(self.store.read_bytes(self._key(step, "manifest.json")))
        entry = manifest["files"]["state.npz"]
        data = self.store.read_bytes(self._key(step, "state.npz"))
        if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ValueError(f"state.npz has {len(data)} bytes, sha256 mismatch with the manifest")
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        return Checkpoint(step=step, arrays=arrays, meta=manifest["meta"])
