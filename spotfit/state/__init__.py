"""Persistent state: `db` (StateDB: jobs, attempts, events), `states` (the state enums), `dialect`
(SQLite and PostgreSQL), `memory` and `wait` (a full or locked DB), `lease` (one controller per job).

The package's names load on first use (PEP 562), so that importing one of its light modules
(`spotfit.state.states`) does not load the rest: `from spotfit.state import StateDB`
works as it did when this was one module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotfit.core.lazy import lazy_names

if TYPE_CHECKING:
    from spotfit.state.db import StateDB as StateDB

__getattr__ = lazy_names(__name__, "spotfit.state.db")
