"""The cloud-init user-data of an attempt: install the pinned runtime, run the attempt, power off.

User-data is readable by anyone who may describe the instance and by every process on it, so
it carries no secret: storage access comes from the instance profile (IAM role), and the
job's environment travels through the job's store prefix, not through here. `check_no_secrets`
refuses a script that looks like it holds AWS credentials.

The script installs a Python 3.11 virtual environment with `uv` (Deep Learning AMIs ship an
older Python), installs the pinned `spotfit` runtime, and hands over to the instance agent
(`python -m spotfit.backends.aws.agent`), which fetches the code, sets `TF_CONFIG`, runs the
runtime and forwards spot interruption notices (IMDSv2) as SIGTERM. Whatever happens, the
script ends with `shutdown -h now`, and the instance's shutdown behaviour is `terminate`.

Example:

>>> text = user_data("s3://bucket/jobs/j1", 2, "spotfit[tf-gpu,s3]==0.1.0")
>>> text.startswith("#!/bin/bash") and "shutdown -h now" in text
True
"""

from __future__ import annotations

import re
import shlex

from spotfit.errors import BackendError

IMDS_URL = "http://169.254.169.254"  # used on the instance only; the agent takes it as a flag
VENV = "/opt/spotfit/venv"
LOG = "/var/log/spotfit-attempt.log"

_SECRET_PATTERNS = (
    re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),  # access key ids
    re.compile(r"aws_secret_access_key|aws_session_token|AWS_SECRET|AWS_SESSION_TOKEN", re.I),
)

_TEMPLATE = """#!/bin/bash
# spotfit: attempt {attempt} of {job_url}
# No secrets here: storage access comes from the instance profile (IAM role).
set -euo pipefail
exec >>{log} 2>&1
trap 'echo "spotfit: attempt over, powering off"; shutdown -h now' EXIT
python3 -m pip install --quiet --user 'uv>=0.5,<1'
export PATH="$HOME/.local/bin:/root/.local/bin:$PATH"
uv venv --python 3.11 {venv}
uv pip install --python {venv}/bin/python {pip_spec}
{venv}/bin/python -m spotfit.backends.aws.agent {job_url_q} {attempt} --imds {imds}
"""


def user_data(job_url: str, attempt: int, pip_spec: str, imds_url: str = IMDS_URL) -> str:
    """The user-data script of one attempt (every worker of it runs the same script)."""
    text = _TEMPLATE.format(attempt=int(attempt), job_url=job_url.replace("\n", " "), log=LOG, venv=VENV,
                            pip_spec=shlex.quote(pip_spec), job_url_q=shlex.quote(job_url),
                            imds=shlex.quote(imds_url))
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
