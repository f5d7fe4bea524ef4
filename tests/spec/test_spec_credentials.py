"""Credentials never enter a spec: a URL with user info is refused in every field, and never echoed."""

from __future__ import annotations

import os
import subprocess

import pytest

from spotfit.errors import SpecError
from spotfit.spec.job import parse_spec
from tests.support.jobs import spotfit_cmd

SECRET = "wJalrXUtnFEMI-canary"
FIELDS = [
    ("checkpoint", "store", f"s3://AKIAEXAMPLE:{SECRET}@127.0.0.1:8333/bucket/prefix"),
    ("checkpoint", "store", f"file://user:{SECRET}@localhost/tmp/store"),
    ("data", "source", f"gs://token:{SECRET}@bucket/data"),
    ("export", "registry", f"s3://{SECRET}@bucket/models"),
    ("kubernetes", "runtime_wheel", f"s3://k:{SECRET}@bucket/spotfit.whl"),
    ("aws", "runtime_pip", f"git+https://x:{SECRET}@github.com/me/spotfit"),
]


@pytest.mark.parametrize("section, field, url", FIELDS)
def test_a_url_with_user_info_is_refused_in_any_field(section, field, url):
    with pytest.raises(SpecError) as info:
        parse_spec({"name": "j", "script": "t.py", section: {field: url}}, source="job.yaml")
    err = info.value
    assert err.message.startswith(f"Invalid `{section}.{field}` in job.yaml"), err.message
    assert "without credentials" in err.message and "environment" in err.message and "profile" in err.message
    assert SECRET not in err.message and SECRET not in err.hint  # the value is quoted with its user info cut
    assert "***@" in err.message and "\n" not in err.message


def test_spotfit_run_refuses_a_store_with_credentials_and_creates_nothing(tmp_path, spotfit_home):
    (tmp_path / "train.py").write_text("print('never runs')\n")
    spec = tmp_path / "spotfit.yaml"
    spec.write_text(f"name: cred\nscript: train.py\ncheckpoint: {{store: 'file://user:{SECRET}@localhost/st'}}\n"
                    "market: {trace: null}\n")
    out = subprocess.run(spotfit_cmd("run", str(spec), "--json"), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, cwd=tmp_path, env=os.environ)
    assert out.returncode == 2, out.stderr
    assert "checkpoint.store" in out.stderr and SECRET not in out.stderr + out.stdout
    assert not [p for p in tmp_path.rglob("*") if "user" in p.name or "localhost" in p.name]
    held = [p for p in spotfit_home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert held == []
