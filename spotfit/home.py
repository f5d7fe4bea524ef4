"""Where spotfit keeps its state: `$SPOTFIT_HOME` (default `~/.spotfit`).

It holds the SQLite state DB (`state.db`), the default `file://` object store (`store/`), the
default model registry (`registry/`) and the default data cache (`cache/data/`).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "SPOTFIT_DATA_DIR"  # the runtime sets it to the cached copy of `data.source`


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


def default_cache_dir() -> Path:
    """The local data cache: `$SPOTFIT_CACHE_DIR`, else `$SPOTFIT_HOME/cache/data`."""
    if os.environ.get("SPOTFIT_CACHE_DIR"):
        return Path(os.environ["SPOTFIT_CACHE_DIR"]).expanduser()
    return home() / "cache" / "data"
