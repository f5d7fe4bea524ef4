"""Persistent state: `db` (StateDB: jobs, attempts, events), `states` (the state enums), `dialect`
(SQLite and PostgreSQL), `memory` and `wait` (a full or locked DB), `lease` (one controller per job).

The package's names load on first use (PEP 562), so that importing one of its light modules
(`spotfit.state.states`) does not load the rest: `from spotfit.state import StateDB`
works as it did when this was one module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spotfit.state.db import StateDB as StateDB

_MAIN = "spotfit.state.db"


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        return getattr(importlib.import_module(_MAIN), name)
    return module
