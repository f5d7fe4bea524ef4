"""What a notebook attempt and the controller side agree on: the token (its variable, its 0600 file: made,
read and deleted here), the local folders.

A `kind: notebook` attempt (runtime/notebook.py) runs JupyterLab; `spotfit notebook` and the
backends (interactive/notebooks.py, backends/) hand it its token and find its files. The store keys it
writes are in layout.py (`NOTEBOOK_FILES`, `NOTEBOOK_SERVER`).

>>> token_file("j1").relative_to(attempt_dir("j1", 2).parent).as_posix(), attempt_dir("j1", 2).name
('token', '0002')
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from spotfit.errors import NotFoundError
from spotfit.host.home import home

TOKEN_ENV = "SPOTFIT_NOTEBOOK_TOKEN"  # the token, from a cloud backend's secret store


def attempt_dir(job_id: str, attempt: int) -> Path:
    """Where attempt `attempt` of a notebook keeps its working folder (`work/`) and Jupyter's runtime files."""
    return home() / "notebooks" / job_id / f"{attempt:04d}"


def token_file(job_id: str) -> Path:
    """The 0600 file that holds a notebook's token on the machine that started it."""
    return home() / "notebooks" / job_id / "token"


def new_token(job_id: str) -> str:
    """A fresh random token for notebook `job_id`, written to its 0600 file (folders 0700); returns it."""
    token = secrets.token_urlsafe(32)
    path = token_file(job_id)
    for folder in (path.parent.parent, path.parent):
        folder.mkdir(exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token


def forget_token(job_id: str) -> None:
    """The job ended: delete its token file (a cloud backend deletes its secret store's copy)."""
    token_file(job_id).unlink(missing_ok=True)


def read_token(job_id: str) -> str:
    path = token_file(job_id)
    if not path.is_file():
        raise NotFoundError(f"No token for notebook {job_id} on this machine: expected {path}.",
                            hint="Open the notebook from the machine that started it.")
    return path.read_text().strip()
