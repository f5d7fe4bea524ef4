"""Where a training script finds its data: `data_dir()`.

Under spotfit the runtime syncs the job's `data.source` into the local cache before the script
starts and sets `SPOTFIT_DATA_DIR` to the cached copy; a script reads files from there. Run
without spotfit, `data_dir(source)` syncs `source` into the same cache itself, so the script
works unchanged on a workstation. A script that should not import spotfit can read the
environment variable directly: `os.environ["SPOTFIT_DATA_DIR"]`.

Example:

>>> import os, tempfile
>>> os.environ["SPOTFIT_DATA_DIR"] = tempfile.gettempdir()
>>> data_dir() == __import__("pathlib").Path(tempfile.gettempdir())
True
>>> del os.environ["SPOTFIT_DATA_DIR"]
"""

from __future__ import annotations

import os
from pathlib import Path

from spotfit.core.arguments import env_folder
from spotfit.errors import UsageError
from spotfit.host.home import DATA_DIR_ENV as ENV_VAR
from spotfit.host.home import default_cache_dir


def data_dir(source: str | None = None) -> Path:
    """The local folder with the job's data: `$SPOTFIT_DATA_DIR`, else `source` synced now."""
    if os.environ.get(ENV_VAR):
        return env_folder(ENV_VAR, Path())
    if source is None:
        raise UsageError(
            f"No data folder: {ENV_VAR} is not set and no source was given.",
            hint="Run the script under spotfit with `data: {source: ...}` in the job spec, "
                 "or pass a store URL, e.g. `data_dir('s3://bucket/dataset')`.",
        )
    if "://" not in source:
        return Path(source)
    from spotfit.stores.datacache import DataCache

    return Path(DataCache(default_cache_dir()).sync(source).path)
