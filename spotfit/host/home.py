"""Where spotfit keeps its state: `$SPOTFIT_HOME` (default `~/.spotfit`).

It holds the SQLite state DB (`state.db`), the default `file://` object store (`store/`), the
default model registry (`registry/`) and the default data cache (`cache/data/`).
`$SPOTFIT_STATE_URL` moves the state elsewhere: a team's PostgreSQL (`postgresql://...`) or a
SQLite file on a volume (`sqlite:////var/lib/spotfit/state.db`); see docs/team-state.md.

Everything there is private to its owner: spotfit's processes (CLI, controller, and the runtime
they start) run under the umask 077 (`private_umask`), so each folder spotfit creates is 0700
and each file 0600, the state DB and its -wal and -shm included. A home that others can enter
gets one warning line, with the `chmod` that closes it.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from spotfit.core.arguments import env_folder
from spotfit.errors import UsageError
from spotfit.state.dialect import display_target

DATA_DIR_ENV = "SPOTFIT_DATA_DIR"  # the runtime sets it to the cached copy of `data.source`
STATE_URL_ENV = "SPOTFIT_STATE_URL"


PRIVATE_UMASK = 0o077  # folders 0700, files 0600
_warned: set[Path] = set()  # homes already warned about in this process


def private_umask() -> None:
    """Make what this process (and every process it starts) creates readable by its owner only."""
    os.umask(PRIVATE_UMASK)


def home() -> Path:
    """The spotfit home folder, created on first use (0700); a home open to others is warned about once."""
    path = env_folder("SPOTFIT_HOME", Path.home() / ".spotfit").resolve()
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        _warn_if_open(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.mkdir(mode=0o700, exist_ok=True)
    return path


def _warn_if_open(path: Path) -> None:
    if path in _warned or not path.is_dir():
        return
    _warned.add(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        sys.stderr.write(f"warning: the spotfit home {path} is open to other users (mode {mode:04o}): its state, "
                         f"tokens and store are theirs to read; run `chmod -R go-rwx {path}`\n")


def default_store_url() -> str:
    """The default object store: a folder under the home."""
    return f"file://{home() / 'store'}"


def default_registry_url() -> str:
    """The default model registry: a folder under the home."""
    return f"file://{home() / 'registry'}"


def export_scratch(job_id: str) -> Path:
    """Where a job's exports write their formats before the upload (runtime/export.py); removed when
    each export ends and when the job ends (controller/loop.py)."""
    return home() / "exports" / job_id


def default_cache_dir() -> Path:
    """The local data cache: `$SPOTFIT_CACHE_DIR`, else `$SPOTFIT_HOME/cache/data`."""
    if os.environ.get("SPOTFIT_CACHE_DIR"):
        return env_folder("SPOTFIT_CACHE_DIR", Path())
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
