"""What a notebook attempt and the controller side agree on: the token's variable, the local folders.

A `kind: notebook` attempt (runtime/notebook.py) runs JupyterLab; `spotfit notebook` and the
backends (notebooks.py, backends/) hand it its token and find its files. The store keys it
writes are in layout.py (`NOTEBOOK_FILES`, `NOTEBOOK_SERVER`).

>>> token_file("j1").relative_to(attempt_dir("j1", 2).parent).as_posix(), attempt_dir("j1", 2).name
('token', '0002')
"""

from __future__ import annotations

from pathlib import Path

from spotfit.host.home import home

TOKEN_ENV = "SPOTFIT_NOTEBOOK_TOKEN"  # the token, from a cloud backend's secret store


def attempt_dir(job_id: str, attempt: int) -> Path:
    """Where attempt `attempt` of a notebook keeps its working folder (`work/`) and Jupyter's runtime files."""
    return home() / "notebooks" / job_id / f"{attempt:04d}"


def token_file(job_id: str) -> Path:
    """The 0600 file that holds a notebook's token on the machine that started it."""
    return home() / "notebooks" / job_id / "token"
