"""Jobs in a test's state DB, and the environment of a child process that opens it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from spotfit.state.db import StateDB

ROOT = Path(__file__).resolve().parents[2]


def add_job(db: StateDB, job_id: str, name: str, created_at: float | None = None) -> None:
    """A pending job `job_id` named `name`, created at `created_at` when given."""
    db.create_job(job_id, name, spec_json=json.dumps({"name": name}), store_url="memory://s")
    if created_at is not None:
        # Pin the creation time: two create_job calls can land on the same clock reading.
        db.update_job(job_id, created_at=created_at)


def child_env() -> dict[str, str]:
    """This environment, with this checkout first on a child Python's path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
