"""`once_per_run(tmp_path_factory, name, compute)`: a fixture's value computed by one xdist worker.

Under `pytest -n 2` (`make check`'s load distribution) the tests of one module land on both
workers, and a module-scoped fixture is computed on each. For a pure, deterministic computation
(no process, no file, no server: tests/market/test_policies.py's simulations) the first worker
to ask computes it and pickles it into the run's shared temporary folder; the other, asking later
or waiting on the lock meanwhile, reads the same value. Without xdist it is computed in place.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[], T]) -> T:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return compute()
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder: popen-gw0, popen-gw1 are in it
    path = shared / f"{name}.pickle"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = compute()
        path.write_bytes(pickle.dumps(value))
        return value
