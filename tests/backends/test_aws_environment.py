"""What instances install: the wheel of the running spotfit, the job's environment, the cache key."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spotfit.backends import environment
from spotfit.backends import wheel as wheel_module
from spotfit.backends.aws.backend import AwsBackend
from spotfit.backends.aws.spec import aws_options
from spotfit.backends.base import LaunchOptions
from spotfit.backends.environment import cache_root, instance_env
from spotfit.backends.wheel import running_wheel
from spotfit.errors import SpecError, UsageError
from spotfit.spec.job import load_spec, parse_spec
from spotfit.stores import open_store
from tests.support.aws_moto import launch_request


def test_the_wheel_holds_exactly_the_running_package_and_its_dependencies(tmp_path):
    wheel = running_wheel()
    (tmp_path / wheel.filename).write_bytes(wheel.data)
    with zipfile.ZipFile(tmp_path / wheel.filename) as zf:
        names = set(zf.namelist())
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        shipped = zf.read("spotfit/backends/wheel.py")
    assert shipped == Path(wheel_module.__file__).read_bytes()
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert "Requires-Dist: s3fs" in meta and 'extra == "tf-gpu"' in meta
    # pip accepts it, extras included (a dry run, nothing fetched or installed).
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps",
                          "--quiet", f"{tmp_path / wheel.filename}[s3]"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_the_cache_key_changes_with_the_environment_and_only_with_it():
    def env(job: str, image: str, pip: str, extras: tuple[str, ...] = ()):
        return instance_env(job, image, LaunchOptions(runtime_extras=extras,
                                                      environment={"pip": [pip], "requirements": ""}))

    base, same = env("s3://b/p/jobs/j1", "ami-1", "a==1"), env("s3://b/p/jobs/j2", "ami-1", "a==1")
    assert base.key == same.key and base.env_url == same.env_url  # jobs sharing a store share the cache
    for other in (env("s3://b/p/jobs/j1", "ami-2", "a==1"), env("s3://b/p/jobs/j1", "ami-1", "a==2"),
                  env("s3://b/p/jobs/j1", "ami-1", "a==1", extras=("s3",))):
        assert other.key != base.key
    assert cache_root("s3://b/p/jobs/j1") == "s3://b/p/cache" and cache_root("s3://b/x") == "s3://b/x/cache"


def test_upload_puts_wheel_and_requirements_where_the_boot_script_reads_them(tmp_path):
    env = instance_env(f"file://{tmp_path}/jobs/j1", "ami-1",
                       LaunchOptions(environment={"pip": ["b==2"], "requirements": "a==1\n\n# c\n"}))
    environment.upload(env)
    store = open_store(env.cache_url)
    assert store.read_bytes(f"wheels/{env.wheel_name}") == running_wheel().data
    assert store.read_bytes(f"env/{env.key}.requirements.txt").decode() == "a==1\n# c\nb==2\n"


def test_spec_environment_reads_the_requirements_file_and_refuses_unknown_keys(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "requirements.txt").write_text("pandas>=2,<3\n")
    (tmp_path / "job.yaml").write_text("name: j\nscript: train.py\nbackend: aws\n"
                                       "environment: {requirements: requirements.txt, pip: [rich]}\n")
    options = aws_options(load_spec(tmp_path / "job.yaml"))
    assert options.environment == {"pip": ["rich"], "requirements": "pandas>=2,<3\n"}
    with pytest.raises(SpecError, match="requirement"):
        parse_spec({"name": "j", "script": "t.py", "environment": {"requirement": "r.txt"}})
    (tmp_path / "job.yaml").write_text("name: j\nscript: train.py\nenvironment: {requirements: missing.txt}\n")
    with pytest.raises(SpecError, match="environment.requirements"):
        load_spec(tmp_path / "job.yaml")


def test_launch_refuses_a_store_the_boot_script_cannot_fetch_from():
    # The boot script fetches the wheel and the cached venv with `aws s3 cp`: only s3:// works.
    with pytest.raises(UsageError, match="expected an s3:// URL"):
        AwsBackend().launch(launch_request("gs://bucket/jobs/job-1"))
