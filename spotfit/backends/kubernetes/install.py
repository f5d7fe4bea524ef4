"""How a pod gets this spotfit: the install step its container runs before the attempt.

The image (`kubernetes.image`, default an official TensorFlow GPU image with Python 3.11)
brings TensorFlow; the pod adds spotfit with `kubernetes.runtime_extras` (default `s3,gcs`, no
TensorFlow extra, so the image's TF stays; a `kind: notebook` job adds `notebook`), from:

- by default, the wheel of the spotfit that launched the job (`spotfit.backends.wheel`), which
  `launch` uploads once per content to `<store>/cache/wheels/`: this very code, no index;
- `kubernetes.runtime_wheel` (any store URL of a spotfit wheel) instead, when set;
- `kubernetes.runtime_pip` (a published spotfit, e.g. `spotfit[s3,gcs]==0.1.0`) from the
  package index, only when set; it is installed as written.

A wheel is fetched with fsspec (the pod's store credentials come from the cluster: IRSA or
workload identity).

>>> install_lines(None, ["s3"], "spotfit[s3,gcs]==0.1.0")
["python3 -m pip install --quiet 'spotfit[s3,gcs]==0.1.0'"]
>>> install_lines("s3://b/w/spotfit-0.1.0-py3-none-any.whl", ["s3", "gcs"])[-1]
"python3 -m pip install --quiet '/tmp/spotfit-0.1.0-py3-none-any.whl[s3,gcs]'"
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath

from spotfit.errors import UsageError

DEFAULT_EXTRAS = ("s3", "gcs")
STORE_CLIENTS = "'fsspec>=2026.9,<2027' 's3fs>=2026.9,<2027' 'gcsfs>=2026.9,<2027'"
_FETCH = "import fsspec, sys; fsspec.open(sys.argv[1]).fs.get(sys.argv[1], sys.argv[2])"


def install_lines(wheel_url: str | None, extras: Sequence[str], runtime_pip: str | None = None) -> list[str]:
    """The shell lines that install spotfit in the pod: `runtime_pip` from the index, else the wheel at `wheel_url`."""
    if runtime_pip:
        return [f"python3 -m pip install --quiet {shlex.quote(runtime_pip)}"]
    name = PurePosixPath((wheel_url or "").split("://", 1)[-1]).name
    if not name.endswith(".whl") or not name.startswith("spotfit-"):
        raise UsageError(f"Invalid `kubernetes.runtime_wheel`: received {wheel_url!r}, expected the URL of a "
                         "spotfit wheel (…/spotfit-VERSION-py3-none-any.whl).",
                         hint="Remove it to install the wheel of the running spotfit, which `spotfit run` ships "
                              "to the job's store.")
    local = f"/tmp/{name}"
    return [f"python3 -m pip install --quiet {STORE_CLIENTS}",
            f"python3 -c {shlex.quote(_FETCH)} {shlex.quote(wheel_url or '')} {shlex.quote(local)}",
            f"python3 -m pip install --quiet {shlex.quote(local + '[' + ','.join(extras) + ']')}"]


def container_script(wheel_url: str | None, extras: Sequence[str], runtime_pip: str | None = None) -> str:
    """The container's shell script: install spotfit, then hand over to the pod entry (`pod.py`).

    `exec` makes the entry the container's main process, so the kubelet's SIGTERM reaches it.
    """
    lines = ["set -eu", *install_lines(wheel_url, extras, runtime_pip),
             'exec python3 -m spotfit.backends.kubernetes.pod "$SPOTFIT_JOB_URL" "$SPOTFIT_ATTEMPT"']
    return "\n".join(lines) + "\n"
