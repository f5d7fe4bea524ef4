"""Where spotfit keeps its state: `$SPOTFIT_HOME` (default `~/.spotfit`).

It holds the SQLite state DB (`state.db`), the default `file://` object store (`store/`) and
the default model registry (`registry/`).
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The spotfit home folder, created on first use."""
    path = Path(os.environ.get("SPOTFIT_HOME") or Path.home() / ".spotfit").expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_store_url() -> str:
    """The default object store: a folder under the home."""
    return f"file://{home() / 'store'}"


def default_registry_url() -> str:
    """The default model registry: a folder under the home."""
    return f"file://{home() / 'registry'}"
