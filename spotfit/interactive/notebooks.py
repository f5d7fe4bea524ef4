"""Notebook jobs on the controller side: submit one with a fresh token, and say where it listens.

A notebook is a job of `kind: notebook` (docs/notebooks.md). It is recorded with a random token
(`attempt/notebook.py`'s `new_token`), kept in a 0600 file under `$SPOTFIT_HOME/notebooks/JOB/token`
(which the user's browser and a local attempt read) and, on a cloud backend, in its secret store
(SSM, the attempt's Kubernetes Secret), never in the job's store; the file is deleted when the job
ends (`forget_token`). The token never appears in a JSON document nor on a command line. `where`
reads the running attempt's `notebook/server.json` and answers the local URL: on the local
backend the server's own 127.0.0.1 port; elsewhere a local port that `spotfit port-forward`
carries to it.

No TensorFlow, no Jupyter here: the attempt runs those (spotfit/runtime/notebook.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from spotfit.attempt import layout
from spotfit.errors import NotFoundError, UsageError
from spotfit.spec.job import JobSpec, load_spec, parse_spec
from spotfit.stores.base import ObjectStore

REMOTE_PORT_NOTE = "the attempt's port on its machine"


def notebook_spec(path: str | None) -> JobSpec:
    """The spec at `path` (it must say `kind: notebook`), or the default notebook in this folder."""
    if path is None:
        # Interactive work runs in real time: the bundled market replayed at one trace second per second.
        return parse_spec({"name": "notebook", "kind": "notebook", "market": {"time_scale": 1.0}},
                          source="<default notebook>", base_dir=os.getcwd())
    spec = load_spec(path)
    if not spec.is_notebook:
        raise UsageError(f"Invalid spec for `spotfit notebook`: {path} has kind {spec.kind!r}, expected "
                         "`kind: notebook`.", hint="Add `kind: notebook` to the spec, or start it with `spotfit run`.")
    return spec






def seed(spec: JobSpec, job_id: str, store: ObjectStore) -> None:
    """Write the seed folder's files before the job is recorded (the token is `new_token`'s)."""
    if spec.notebook.folder is not None:
        from spotfit.stores.folder_sync import FolderSync

        folder = (Path(spec.base_dir) / spec.notebook.folder).resolve()
        if not folder.is_dir():
            raise UsageError(f"Invalid `notebook.folder`: received {spec.notebook.folder!r}, expected a folder "
                             f"relative to the spec (looked for {folder}).", hint="Fix or remove `notebook.folder`.")
        FolderSync(store, layout.NOTEBOOK_FILES, folder).push()




def server_info(store: ObjectStore, attempt: int | None) -> dict | None:
    """The running attempt's `notebook/server.json`, if it is that attempt's (None while it starts)."""
    try:
        info = json.loads(store.read_bytes(layout.NOTEBOOK_SERVER))
    except NotFoundError:
        return None
    return info if attempt is not None and info.get("attempt") == attempt else None


def url(port: int, token: str | None = None) -> str:
    """The JupyterLab URL on 127.0.0.1:`port`, with `token` when given (never in a JSON document)."""
    return f"http://127.0.0.1:{port}/lab" + (f"?token={token}" if token else "")
