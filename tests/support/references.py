"""Reference runs, computed once per pytest run: the uninterrupted runs that resume tests compare with.

`shared(parts, compute)` returns the JSON document that `compute()` returns for the key `parts`
(what the run depends on: the script's text, its args, the seed, the runtime). The first test of
this pytest run that asks computes it, under a file lock on which any other worker asking for the
same key waits; every later asker reads the stored document. The folder
(`$SPOTFIT_TEST_REFERENCES`) is this run's, shared by its xdist workers (tests/conftest.py sets it),
so no run reads another run's references.

>>> import tempfile
>>> root, calls = Path(tempfile.mkdtemp()), []
>>> shared(["demo", 1], lambda: calls.append(1) or {"weights_sha256": "ab"}, root)
{'weights_sha256': 'ab'}
>>> shared(["demo", 1], lambda: calls.append(1) or {"weights_sha256": "cd"}, root), len(calls)
({'weights_sha256': 'ab'}, 1)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT_ENV = "SPOTFIT_TEST_REFERENCES"


def shared(parts: list[Any], compute: Callable[[], dict], root: Path | None = None) -> dict:
    root = root or Path(os.environ[ROOT_ENV])
    root.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]
    doc_path = root / f"{key}.json"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when the test fails
        if doc_path.exists():
            return json.loads(doc_path.read_text())
        doc = compute()
        tmp = doc_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(doc_path)
        return doc
