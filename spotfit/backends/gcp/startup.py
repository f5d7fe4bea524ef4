"""The startup script of an attempt's VMs: install the runtime (or unpack it from the cache), run, power off.

It is the boot script every cloud shares (backends/boot_script.py) with Google's tools (`STEPS`): the
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
>>> from spotfit.backends.base import LaunchOptions
>>> text = startup_script("gs://b/jobs/j1", 2, instance_env("gs://b/jobs/j1", "family/tf", LaunchOptions()))
>>> text.startswith("#!/bin/bash") and "gcloud storage cp" in text and "shutdown -h now" in text
True
"""

from __future__ import annotations

from spotfit.backends.boot_script import BootSteps, boot_script
from spotfit.backends.environment import InstanceEnv

METADATA_URL = "http://metadata.google.internal"
ROOT = "/opt/spotfit"

# What the GCP startup script puts into the shared boot script: gcloud, the metadata server, the image's Python.
STEPS = BootSteps(
    access="storage and Secret Manager access come from the VM's service account",
    copy="gcloud storage cp --quiet", metadata_var="METADATA", metadata_env="SPOTFIT_METADATA_URL",
    metadata_url=METADATA_URL, find_python='  PY="$(command -v python3.11 || command -v python3)"\n',
    agent="spotfit.backends.gcp.agent", agent_flag="--metadata")


def startup_script(job_url: str, attempt: int, env: InstanceEnv, root: str = ROOT,
                   metadata_url: str = METADATA_URL) -> str:
    """The startup script of one attempt (every worker of it runs the same script)."""
    from spotfit.backends.gcp.launch import check_no_secrets

    text = boot_script(job_url, attempt, env, STEPS, root, metadata_url)
    check_no_secrets(text)
    return text
