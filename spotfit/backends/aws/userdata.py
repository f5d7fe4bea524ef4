"""The cloud-init user-data of an attempt: install the runtime (or unpack it from the cache), run, power off.

User-data is readable by anyone who may describe the instance and by every process on it, so
it carries no secret: storage access comes from the instance profile (IAM role), and the
job's environment travels through the job's store prefix, not through here. `check_no_secrets`
refuses a script that looks like it holds AWS credentials.

The script is the boot script every cloud shares (`backends/boot_script.py`) with AWS's own
steps (`STEPS`; see `environment.py` for what is installed and the cache key):

1. fetches `<cache>/env/<key>.tar.gz` with the AWS CLI (on every Deep Learning AMI) and unpacks
   it as the virtual environment; if there is none yet, makes the venv with the image's
   Python 3.11 (`python3.11 -m venv --system-site-packages`; without one, `uv` installs a
   Python 3.11 under the root, where the archive keeps it), pip-installs the shipped spotfit
   wheel and the job's requirements, and uploads the venv for the next boot;
2. hands over to the instance agent (`python -m spotfit.backends.aws.agent`), which fetches the
   code, sets `TF_CONFIG`, runs the runtime and forwards spot interruption notices (IMDSv2) as
   SIGTERM;
   On an instance type with instance-store NVMe it first mounts the NVMe and sets
   `SPOTFIT_CACHE_DIR` there (`disks.nvme_script`), so the dataset is not cached on the root;
   with `data.volume: snapshot`, it mounts the data volume instead, and fills and snapshots it
   when it is new (`data_volume.boot_script`); with `data.mode: mount`, it installs rclone
   (`MOUNT_TOOLS`) unless the image has rclone or mount-s3;
3. whatever happens, ends with `shutdown -h now`; the instance's shutdown behaviour is `terminate`.

Two environment variables, unset on EC2, let the emulated instance of the tests
(tests/support/emulated_instance.py) run this very script in a sandbox: `SPOTFIT_ROOT` (default
`/opt/spotfit`: the venv and `boot.log`) and `SPOTFIT_IMDS_URL` (default the real
`http://169.254.169.254`).

Example:

>>> from spotfit.backends.environment import instance_env
>>> from spotfit.backends.base import LaunchOptions
>>> text = user_data("s3://bucket/jobs/j1", 2, instance_env("s3://bucket/jobs/j1", "ami-1", LaunchOptions()))
>>> text.startswith("#!/bin/bash") and "shutdown -h now" in text
True
"""

from __future__ import annotations

import re

from spotfit.backends.aws.disks import nvme_script
from spotfit.backends.boot_script import BootSteps, boot_script
from spotfit.backends.environment import InstanceEnv
from spotfit.errors import BackendError

IMDS_URL = "http://169.254.169.254"
ROOT = "/opt/spotfit"

_SECRET_PATTERNS = (
    re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),  # access key ids
    re.compile(r"aws_secret_access_key|aws_session_token|AWS_SECRET|AWS_SESSION_TOKEN", re.I),
)

# What the AWS user-data puts into the shared boot script: the AWS CLI, IMDS, uv when the image has no 3.11.
STEPS = BootSteps(
    access="storage access comes from the instance profile (IAM role)", copy="aws s3 cp --quiet",
    metadata_var="IMDS", metadata_env="SPOTFIT_IMDS_URL", metadata_url=IMDS_URL,
    find_python="""\
  if ! PY="$(command -v python3.11)"; then
    # No Python 3.11 on the image: uv installs one under $ROOT, where the cache archive keeps it.
    python3 -m pip install --quiet --target "$ROOT/uv" 'uv>=0.5,<1'
    export UV_PYTHON_INSTALL_DIR="$ROOT/python"
    "$ROOT/uv/bin/uv" python install 3.11
    PY="$("$ROOT/uv/bin/uv" python find 3.11)"
  fi
""",
    agent="spotfit.backends.aws.agent", agent_flag="--imds", cache_extra='$([ -d "$ROOT/python" ] && echo python)')


# `data.mode: mount`: the FUSE tool the runtime mounts the data with (runtime/datamount.py), unless the image has one.
MOUNT_TOOLS = """\
if ! command -v mount-s3 >/dev/null 2>&1 && ! command -v rclone >/dev/null 2>&1; then
  (apt-get update -q && apt-get install -y -q rclone fuse3) >/dev/null 2>&1 \\
    || echo "spotfit: could not install rclone; the runtime copies the data instead"
fi
"""


def user_data(job_url: str, attempt: int, env: InstanceEnv, root: str = ROOT, imds_url: str = IMDS_URL,
              nvme_cache: bool = False, data_script: str = "") -> str:
    """The user-data script of one attempt (every worker of it runs the same script).

    `nvme_cache`: mount the instance-store NVMe and keep the data cache there (disks.py);
    `data_script`: else these lines, which mount the data volume (data_volume.boot_script).
    """
    text = boot_script(job_url, attempt, env, STEPS, root, imds_url,
                       before_agent=nvme_script() if nvme_cache else data_script)
    check_no_secrets(text)
    return text


def check_no_secrets(text: str) -> None:
    """Raise `BackendError` when `text` looks like it holds AWS credentials."""
    for pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            raise BackendError(
                "Refusing to launch: the user-data would contain what looks like AWS credentials "
                f"(matched {pattern.pattern!r}); user-data is readable from the instance and the API.",
                hint="Give the instance an IAM role with `aws.iam_instance_profile` instead of keys.",
            )
