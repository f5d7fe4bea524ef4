"""Where spotfit keeps its state: `$SPOTFIT_HOME` (default `~/.spotfit`).

It holds the SQLite state DB (`state.db`), the default `file://` object store (`store/`), the
default model registry (`registry/`) and the default data cache (`cache/data/`).
`$SPOTFIT_STATE_URL` moves the state elsewhere: a team's PostgreSQL (`postgresql://...`) or a
SQLite file on a volume (`sqlite:////var/lib/spotfit/state.db`); see docs/team-state.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from spotfit.errors import UsageError
from spotfit.state_dialect import display_target

DATA_DIR_ENV = "SPOTFIT_DATA_DIR"  # the runtime sets it to the cached copy of `data.source`
STATE_URL_ENV = "SPOTFIT_STATE_URL"


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


def state_target() -> str:
    """Where the state DB is: `$SPOTFIT_STATE_URL` (a PostgreSQL URL or `sqlite:////ABSOLUTE/PATH`), else
    `$SPOTFIT_HOME/state.db`.

    >>> import os
    >>> os.environ[STATE_URL_ENV] = "sqlite:////var/lib/spotfit/state.db"
    >>> state_target()
    '/var/lib/spotfit/state.db'
    >>> del os.environ[STATE_URL_ENV]
    """
    url = os.environ.get(STATE_URL_ENV)
    if not url:
        return str(home() / "state.db")
    if url.startswith(("postgresql://", "postgres://")):
        return url
    if url.startswith("sqlite:////") and len(url) > len("sqlite:////"):  # SQLAlchemy's spelling of /PATH
        return url[len("sqlite:///"):]
    raise UsageError(f"Invalid {STATE_URL_ENV}: received {display_target(url)[:80]!r}, expected "
                     "postgresql://USER@HOST/DB or sqlite:////ABSOLUTE/PATH.",
                     hint=f"Unset {STATE_URL_ENV} to keep the state in $SPOTFIT_HOME/state.db.")


def state_is_shared() -> bool:
    """Whether the state lives where long-running `spotfit controller`s drive its jobs
    (`$SPOTFIT_STATE_URL` is set), rather than in this user's home."""
    return bool(os.environ.get(STATE_URL_ENV))
