"""The startup script of an attempt's VMs: install the runtime (or unpack it from the cache), run, power off.

It is the AWS user-data's boot path (backends/aws/userdata.py) with Google's tools: the
environment the instance installs and its cache key are the same (`backends/environment.py`:
this spotfit's wheel and the job's `environment:` in a venv over the Deep Learning VM image's
TensorFlow, cached as `<store>/cache/env/<key>.tar.gz`), fetched and uploaded with
`gcloud storage cp`, which the image has. Instance metadata is readable by anyone who may get
the instance, so the script carries no secret (`launch.check_no_secrets`): storage and Secret
Manager access come from the VM's service account.

The script hands over to the instance agent (`python -m spotfit.backends.gcp.agent`), which
watches the metadata server's `instance/preempted` and forwards the 30 s notice as SIGTERM (the
runtime checkpoints and exits 75), uploads its log, and whatever happens ends with the boot log
uploaded and `shutdown -h now` (a spot VM is then deleted, `instanceTerminationAction: DELETE`).

Two environment variables, unset on Compute Engine, let the tests run this very script in a
sandbox: `SPOTFIT_ROOT` (default `/opt/spotfit`) and `SPOTFIT_METADATA_URL` (default the real
`http://metadata.google.internal`).

Example:

>>> from spotfit.backends.environment import instance_env
>>> text = startup_script("gs://b/jobs/j1", 2, instance_env("gs://b/jobs/j1", "family/tf", {}))
>>> text.startswith("#!/bin/bash") and "gcloud storage cp" in text and "shutdown -h now" in text
True
"""

from __future__ import annotations

import shlex

from spotfit.attempt import layout
from spotfit.backends.environment import InstanceEnv

METADATA_URL = "http://metadata.google.internal"
ROOT = "/opt/spotfit"

_TEMPLATE = """#!/bin/bash
# spotfit: attempt {attempt} of {job_url}
# No secrets here: storage and Secret Manager access come from the VM's service account.
set -euo pipefail
ROOT="${{SPOTFIT_ROOT:-{root}}}"
METADATA="${{SPOTFIT_METADATA_URL:-{metadata}}}"
VENV="$ROOT/venv"
mkdir -p "$ROOT"
exec >>"$ROOT/boot.log" 2>&1
power_off() {{
  echo "spotfit: attempt over, powering off"
  gcloud storage cp --quiet "$ROOT/boot.log" {boot_log_url} || true
  shutdown -h now
}}
trap power_off EXIT
echo "spotfit: boot at $(date +%s.%N)"
if gcloud storage cp --quiet {env_url} "$ROOT/env.tar.gz"; then
  tar -xzf "$ROOT/env.tar.gz" -C "$ROOT"
  echo "spotfit: environment {key} unpacked from the cache at $(date +%s.%N)"
else
  PY="$(command -v python3.11 || command -v python3)"
  "$PY" -m venv --system-site-packages "$VENV"
{fetch_wheel}  gcloud storage cp --quiet {requirements_url} "$ROOT/requirements.txt"
  (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check {pip_spec} \\
     -r requirements.txt)
  tar -czf "$ROOT/env.tar.gz" -C "$ROOT" venv \\
    && gcloud storage cp --quiet "$ROOT/env.tar.gz" {env_url} || echo "spotfit: could not cache environment {key}"
  echo "spotfit: environment {key} installed at $(date +%s.%N)"
fi
"$VENV/bin/python" -m spotfit.backends.gcp.agent {job_url_q} {attempt} --metadata "$METADATA"
"""


def startup_script(job_url: str, attempt: int, env: InstanceEnv, root: str = ROOT,
                   metadata_url: str = METADATA_URL) -> str:
    """The startup script of one attempt (every worker of it runs the same script)."""
    from spotfit.backends.gcp.launch import check_no_secrets

    boot_log_url = shlex.quote(f"{job_url.rstrip('/')}/{layout.boot_log(int(attempt))}")
    fetch = f'  gcloud storage cp --quiet {shlex.quote(env.wheel_url)} "$ROOT/"\n' if env.wheel_url else ""
    text = _TEMPLATE.format(attempt=int(attempt), job_url=job_url.replace("\n", " "), root=root,
                            metadata=metadata_url, env_url=shlex.quote(env.env_url), key=env.key,
                            fetch_wheel=fetch, requirements_url=shlex.quote(env.requirements_url),
                            pip_spec=shlex.quote(env.pip_spec), job_url_q=shlex.quote(job_url),
                            boot_log_url=boot_log_url)
    check_no_secrets(text)
    return text
