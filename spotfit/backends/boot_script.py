"""The boot script every cloud VM of an attempt runs: install the runtime (or unpack it from the cache), run, power off.

The AWS user-data (`aws/userdata.py`) and the GCP startup script (`gcp/startup.py`) are this one
script; a cloud gives only what is its own (`BootSteps`): the command that copies to and from
its store, its metadata address, how the image's Python 3.11 is found, and the agent to hand
over to. The steps (see `environment.py` for what is installed and the cache key):

1. the boot log goes to `$ROOT/boot.log`; whatever happens, it is uploaded to the job's store
   (`spotfit logs` shows its tail) and the VM powers off (`shutdown -h now`);
2. `<cache>/env/<key>.tar.gz` is fetched and unpacked as the virtual environment; if there is
   none yet, a venv is made over the image's framework (`--system-site-packages`), the shipped
   spotfit wheel and the job's requirements are pip-installed, and the venv is uploaded for the
   next boot;
3. the cloud's own lines, if any (a disk to mount), then the instance agent.

The script carries no secret (each cloud's `check_no_secrets` refuses one that looks like it
does). `SPOTFIT_ROOT` and the metadata variable, unset on a cloud, let the tests' emulated
instances run this very script in a sandbox.

Example:

>>> from spotfit.backends.environment import instance_env
>>> steps = BootSteps("the VM's role", "cp", "META", "SPOTFIT_META_URL", "http://meta", "  PY=python3\\n",
...                   "my.agent", "--meta")
>>> from spotfit.backends.base import LaunchOptions
>>> text = boot_script("s3://b/jobs/j1", 2, instance_env("s3://b/jobs/j1", "img", LaunchOptions()), steps,
...                   "/opt/spotfit")
>>> text.splitlines()[-1]
'"$VENV/bin/python" -m my.agent s3://b/jobs/j1 2 --meta "$META"'
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from spotfit.attempt import layout
from spotfit.backends.environment import InstanceEnv


@dataclass(frozen=True)
class BootSteps:
    """What one cloud puts into the boot script.

    `access`: where storage access comes from (said in the script's header); `copy`: the command
    that copies a file to or from the store (`aws s3 cp --quiet`); `metadata_var`, `metadata_env`,
    `metadata_url`: the shell variable of the metadata address, the environment variable that
    overrides it and its default; `find_python`: lines that set `PY` to the image's Python;
    `agent`, `agent_flag`: the agent's module and the flag that takes the metadata address;
    `cache_extra`: more folders of `$ROOT` the environment archive keeps (a shell word list).
    """

    access: str
    copy: str
    metadata_var: str
    metadata_env: str
    metadata_url: str
    find_python: str
    agent: str
    agent_flag: str
    cache_extra: str = ""


_TEMPLATE = """#!/bin/bash
# spotfit: attempt {attempt} of {job_url}
# No secrets here: {access}.
set -euo pipefail
ROOT="${{SPOTFIT_ROOT:-{root}}}"
{var}="${{{var_env}:-{metadata_url}}}"
VENV="$ROOT/venv"
mkdir -p "$ROOT"
exec >>"$ROOT/boot.log" 2>&1
# Whatever happens, the boot log goes to the job's store (`spotfit logs` shows its tail), then off.
power_off() {{
  echo "spotfit: attempt over, powering off"
  {copy} "$ROOT/boot.log" {boot_log_url} || true
  shutdown -h now
}}
trap power_off EXIT
echo "spotfit: boot at $(date +%s.%N)"
if {copy} {env_url} "$ROOT/env.tar.gz"; then
  tar -xzf "$ROOT/env.tar.gz" -C "$ROOT"
  echo "spotfit: environment {key} unpacked from the cache at $(date +%s.%N)"
else
{find_python}  "$PY" -m venv --system-site-packages "$VENV"
{fetch_wheel}  {copy} {requirements_url} "$ROOT/requirements.txt"
  (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check {pip_spec} \\
     -r requirements.txt)
  tar -czf "$ROOT/env.tar.gz" -C "$ROOT" venv {cache_extra}\\
    && {copy} "$ROOT/env.tar.gz" {env_url} || echo "spotfit: could not cache environment {key}"
  echo "spotfit: environment {key} installed at $(date +%s.%N)"
fi
{before_agent}"$VENV/bin/python" -m {agent} {job_url_q} {attempt} {agent_flag} "${var}"
"""


def boot_script(job_url: str, attempt: int, env: InstanceEnv, steps: BootSteps, root: str,
                metadata_url: str | None = None, before_agent: str = "") -> str:
    """The boot script of one attempt (every worker of it runs the same script).

    `metadata_url`: the default metadata address (else the cloud's); `before_agent`: the cloud's
    own lines that run just before the agent (whole lines, each ending in a newline).
    """
    boot_log_url = shlex.quote(f"{job_url.rstrip('/')}/{layout.boot_log(int(attempt))}")
    fetch = f'  {steps.copy} {shlex.quote(env.wheel_url)} "$ROOT/"\n' if env.wheel_url else ""
    extra = f"{steps.cache_extra} " if steps.cache_extra else ""
    return _TEMPLATE.format(
        attempt=int(attempt), job_url=job_url.replace("\n", " "), access=steps.access, root=root,
        var=steps.metadata_var, var_env=steps.metadata_env, metadata_url=metadata_url or steps.metadata_url,
        copy=steps.copy, boot_log_url=boot_log_url, env_url=shlex.quote(env.env_url), key=env.key,
        find_python=steps.find_python, fetch_wheel=fetch, requirements_url=shlex.quote(env.requirements_url),
        pip_spec=shlex.quote(env.pip_spec), cache_extra=extra, before_agent=before_agent, agent=steps.agent,
        job_url_q=shlex.quote(job_url), agent_flag=steps.agent_flag)
