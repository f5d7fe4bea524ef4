"""The state DB under test: a SQLite file, or an empty schema on the session's PostgreSQL."""

from __future__ import annotations

import os

import pytest

from spotfit.state.db import StateDB
from tests.support.postgres import schema_url


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path) -> str:
    """Where a test's state lives: a SQLite file, or an empty schema on the session's PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "state.db")
    server = request.getfixturevalue("postgres")
    return schema_url(server.url, f"t_{os.getpid()}_{tmp_path.name}".lower().replace("-", "_"))


@pytest.fixture
def db(target):
    state = StateDB(target)
    yield state
    state.close()
