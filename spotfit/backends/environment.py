"""What an instance installs before the agent runs, and the cache that spares a relaunch the install.

The instance installs, into a virtual environment made with `--system-site-packages` (so a
framework the image already has, e.g. TensorFlow on a Deep Learning AMI, is used as is):

- the wheel of the running spotfit (`wheel.running_wheel`) with `aws.runtime_extras`
  (default `tf-gpu,s3`), or, only when `aws.runtime_pip` names one, a published spotfit from
  the package index;
- the job's `environment` on top: the `environment.requirements` file's lines, then
  `environment.pip`, as one requirements file.

The cache key hashes everything that decides the result — the image id, the wheel's sha256 (or
`runtime_pip`), the extras and the requirements text — so the first boot of a given environment
installs it and uploads the venv as `<cache>/env/<key>.tar.gz`, and every later boot with the
same key (the relaunch after a preemption, the other workers, the next job on that store)
unpacks it instead. The cache lives beside `jobs/` under the job's store root
(`s3://bucket/prefix/cache/`), so jobs that share a store share it.

Example:

>>> from spotfit.backends.base import LaunchOptions
>>> env = instance_env("s3://b/spotfit/jobs/j1", "ami-1", LaunchOptions(runtime_extras=("s3",)))
>>> env.cache_url
's3://b/spotfit/cache'
>>> env.env_url == f"s3://b/spotfit/cache/env/{env.key}.tar.gz" and env.pip_spec.endswith("[s3]")
True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from spotfit.backends.wheel import Wheel, cache_root, put_wheel, running_wheel
from spotfit.stores import child, open_store

if TYPE_CHECKING:
    from spotfit.backends.base import LaunchOptions
    from spotfit.spec.job import JobSpec

DEFAULT_EXTRAS = ("tf-gpu", "s3")


class EnvironmentOptions(TypedDict):
    """The job's `environment` in the launch options (`environment_options`): what `requirements_text` reads."""

    pip: list[str]
    requirements: str  # the requirements file's text ("" without one)


@dataclass(frozen=True)
class InstanceEnv:
    """The boot script's inputs: what to install, from where, and the cache key of the result."""

    key: str
    cache_url: str  # the store folder holding wheels/ and env/
    pip_spec: str  # the wheel's local file name with extras, or `aws.runtime_pip`
    wheel_name: str | None  # None when a published spotfit is installed instead
    requirements: str  # the job's environment, one requirements file

    @property
    def env_url(self) -> str:
        return child(self.cache_url, "env", f"{self.key}.tar.gz")

    @property
    def requirements_url(self) -> str:
        return child(self.cache_url, "env", f"{self.key}.requirements.txt")

    @property
    def wheel_url(self) -> str | None:
        return child(self.cache_url, "wheels", self.wheel_name) if self.wheel_name else None


def requirements_text(environment: Mapping[str, Any]) -> str:
    """The job's `environment` (resolved by `aws_options`, backends/aws/spec.py) as one requirements file."""
    lines = [line for line in environment.get("requirements", "").splitlines() if line.strip()]
    return "\n".join(lines + list(environment.get("pip", []))) + "\n"


def instance_env(job_url: str, image_id: str, options: LaunchOptions) -> InstanceEnv:
    """What the instances of a job install (pure apart from building the wheel in memory)."""
    requirements = requirements_text(options.environment or {})
    extras = ",".join(options.runtime_extras or DEFAULT_EXTRAS)
    published = options.runtime_pip
    wheel: Wheel | None = None
    if published:
        runtime = pip_spec = published
    else:
        wheel = running_wheel()
        runtime, pip_spec = f"{wheel.filename}#{wheel.sha256}[{extras}]", f"./{wheel.filename}[{extras}]"
    key = hashlib.sha256(json.dumps([image_id, runtime, requirements]).encode()).hexdigest()[:32]
    return InstanceEnv(key=key, cache_url=cache_root(job_url), pip_spec=pip_spec,
                       wheel_name=wheel.filename if wheel else None, requirements=requirements)


def upload(env: InstanceEnv) -> None:
    """Put the wheel (once per content) and the requirements file where the boot script reads them."""
    store = open_store(env.cache_url)
    if env.wheel_name:  # the running wheel's name (`instance_env`)
        put_wheel(store)
    key = f"env/{env.key}.requirements.txt"
    if not store.exists(key):
        store.write_bytes(key, env.requirements.encode())


def environment_options(spec: JobSpec) -> EnvironmentOptions:
    """The job's `environment` as a cloud instance installs it: `pip` and the requirements file's text
    (what `instance_env` packs; every cloud backend installs the same way)."""
    from spotfit.errors import SpecError
    from spotfit.spec.base import quoted_path

    env, text = spec.environment, ""
    if env.requirements:
        path = Path(spec.base_dir) / env.requirements
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"Invalid `environment.requirements`: cannot read {quoted_path(path)} ({exc}), "
                            "expected a readable pip requirements file.",
                            hint="Restore the file beside the spec, or list the packages in `environment.pip`.") \
                from None
    return {"pip": list(env.pip), "requirements": text}
