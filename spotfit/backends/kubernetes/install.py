"""How a pod gets this spotfit: the install step its container runs before the attempt.

The image (`kubernetes.image`, default an official TensorFlow GPU image with Python 3.11)
brings TensorFlow; the pod adds spotfit without TensorFlow extras, so the image's TF stays:

- `kubernetes.runtime_wheel: s3://bucket/wheels/spotfit-0.1.0-py3-none-any.whl` (any store URL):
  the pod fetches the wheel with fsspec (its credentials come from the cluster: IRSA or
  workload identity) and installs it: this very build of spotfit, not one from an index;
- without it, `spotfit[s3,gcs]==<this version>` from the package index.

`install_lines` is the one function to change when the wheel is shipped another way (the AWS
backend's wheel shipping can hand it the URL it uploaded).

>>> install_lines(None, "0.1.0")[-1]
"python3 -m pip install --quiet 'spotfit[s3,gcs]==0.1.0'"
>>> install_lines("s3://b/w/spotfit-0.1.0-py3-none-any.whl", "0.1.0")[-1]
"python3 -m pip install --quiet '/tmp/spotfit-0.1.0-py3-none-any.whl[s3,gcs]'"
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath

from spotfit.errors import UsageError

STORE_CLIENTS = "'fsspec>=2026.9,<2027' 's3fs>=2026.9,<2027' 'gcsfs>=2026.9,<2027'"
_FETCH = "import fsspec, sys; fsspec.open(sys.argv[1]).fs.get(sys.argv[1], sys.argv[2])"


def install_lines(wheel_url: str | None, version: str) -> list[str]:
    """The shell lines that install spotfit in the pod: from the wheel at `wheel_url`, else the index."""
    if not wheel_url:
        return [f"python3 -m pip install --quiet {shlex.quote(f'spotfit[s3,gcs]=={version}')}"]
    name = PurePosixPath(wheel_url.split("://", 1)[-1]).name
    if not name.endswith(".whl") or not name.startswith("spotfit-"):
        raise UsageError(f"Invalid `kubernetes.runtime_wheel`: received {wheel_url!r}, expected the URL of a "
                         "spotfit wheel (…/spotfit-VERSION-py3-none-any.whl).",
                         hint="Point it at the wheel `pip wheel --no-deps .` built, uploaded to the job's store.")
    local = f"/tmp/{name}"
    return [f"python3 -m pip install --quiet {STORE_CLIENTS}",
            f"python3 -c {shlex.quote(_FETCH)} {shlex.quote(wheel_url)} {shlex.quote(local)}",
            f"python3 -m pip install --quiet {shlex.quote(local + '[s3,gcs]')}"]


def container_script(wheel_url: str | None, version: str) -> str:
    """The container's shell script: install spotfit, then hand over to the pod entry (`pod.py`).

    `exec` makes the entry the container's main process, so the kubelet's SIGTERM reaches it.
    """
    lines = ["set -eu", *install_lines(wheel_url, version),
             'exec python3 -m spotfit.backends.kubernetes.pod "$SPOTFIT_JOB_URL" "$SPOTFIT_ATTEMPT"']
    return "\n".join(lines) + "\n"
