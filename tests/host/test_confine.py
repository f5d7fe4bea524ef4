"""A spec's local paths stay inside the folders spotfit may write for its job (host/confine.py).

Run by its owner: the home, $SPOTFIT_HOME, the spec's folder and `paths.allow`. On a shared state
or a shared controller: the controller's own store/registry/cache folders and `paths.shared`.
Hostile forms: absolute paths, `..`, `file://` URLs with `..`, symlinks that point outside.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from spotfit.controller.classify import ConfigError
from spotfit.controller.loop import Controller
from spotfit.host.home import state_target
from spotfit.spec.job import load_spec
from spotfit.state.db import StateDB
from tests.support.jobs import DIGITS, place_script, spotfit_cmd


@pytest.fixture
def place(tmp_path, monkeypatch, spotfit_home):
    """(spec folder, an outside folder): the home is tmp_path/home, the spec in tmp_path/home/job,
    `outside` beside the home, and the symlink job/out -> outside."""
    home = tmp_path / "home"
    job = home / "job"
    job.mkdir(parents=True)
    place_script(job / "train.py", (DIGITS / "train.py").read_text())
    outside = tmp_path / "outside"
    outside.mkdir()
    (job / "out").symlink_to(outside)
    monkeypatch.setenv("HOME", str(home))
    return job, outside


def _spec(job, **fields) -> str:
    doc = {"name": "confined", "script": "train.py", "market": {"trace": None}, **fields}
    (job / "spotfit.yaml").write_text(yaml.safe_dump(doc))
    return str(job / "spotfit.yaml")


def _validate(spec: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args, spec), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env=os.environ.copy(), timeout=120)


def _hostile(job, outside) -> list[tuple[str, dict]]:
    escape = "../" * len(job.parts)
    return [
        ("checkpoint.store", {"checkpoint": {"store": f"file://{outside}"}}),  # absolute
        ("checkpoint.store", {"checkpoint": {"store": f"file://{job}/{escape}{str(outside)[1:]}/s"}}),  # .. in a URL
        ("checkpoint.store", {"checkpoint": {"store": f"file://{job}/out/s"}}),  # a symlink out
        ("export.registry", {"export": {"registry": f"file://{outside}/models"}}),
        ("data.cache_dir", {"data": {"source": f"file://{job}", "cache_dir": str(outside / "cache")}}),
        ("data.cache_dir", {"data": {"source": f"file://{job}", "cache_dir": f"{escape}{str(outside)[1:]}"}}),
        ("data.cache_dir", {"data": {"source": f"file://{job}", "cache_dir": "out/cache"}}),
    ]


@pytest.mark.parametrize("case", range(7))
def test_validate_and_run_refuse_a_local_path_outside_the_owners_folders(place, case):
    job, outside = place
    field, fields = _hostile(job, outside)[case]
    spec = _spec(job, **fields)
    for command in ("validate", "run"):
        done = _validate(spec, command)
        first = done.stderr.splitlines()[0]
        assert done.returncode == 2, done.stderr
        assert first.startswith(f"error: Invalid `{field}` in {spec}:"), first
        assert "expected a folder inside the home, $SPOTFIT_HOME, the spec's folder or a folder in " \
               "`paths.allow`" in first
        assert "`paths.allow` in $SPOTFIT_HOME/config.yaml" in done.stderr  # the setting to change
    assert os.listdir(outside) == []  # nothing written there
    assert not (job / "out").resolve().joinpath("s").exists()


def test_the_spec_folder_the_home_and_paths_allow_are_the_owners(place, spotfit_home):
    job, outside = place
    assert _validate(_spec(job, checkpoint={"store": f"file://{job}/store"},
                           data={"source": f"file://{job}", "cache_dir": "cache"}), "validate").returncode == 0
    assert _validate(_spec(job, export={"registry": f"file://{job.parent}/models"}), "validate").returncode == 0
    spec = _spec(job, checkpoint={"store": f"file://{outside}/store"})
    assert _validate(spec, "validate").returncode == 2
    spotfit_home.mkdir(parents=True, exist_ok=True)
    (spotfit_home / "config.yaml").write_text(yaml.safe_dump({"paths": {"allow": [str(outside)]}}))
    assert _validate(spec, "validate").returncode == 0, _validate(spec, "validate").stderr


def test_a_relative_file_url_is_refused(place):
    job, _ = place
    done = _validate(_spec(job, checkpoint={"store": "file://etc/x"}), "validate")
    assert done.returncode == 2 and "expected an absolute path, file:///PATH" in done.stderr.splitlines()[0]


def test_on_a_shared_state_only_paths_shared_is_open(place, spotfit_home, monkeypatch, tmp_path):
    job, outside = place
    monkeypatch.setenv("SPOTFIT_STATE_URL", f"sqlite:///{tmp_path}/team.db")
    spec = _spec(job, checkpoint={"store": f"file://{job}/store"})  # the submitter's own folder
    done = _validate(spec, "validate")
    assert done.returncode == 2, done.stderr
    assert "or a folder in `paths.shared` (a shared controller)" in done.stderr.splitlines()[0]
    spotfit_home.mkdir(parents=True, exist_ok=True)
    (spotfit_home / "config.yaml").write_text(yaml.safe_dump({"paths": {"shared": [str(job)]}}))
    assert _validate(spec, "validate").returncode == 0


def test_a_shared_controller_fails_a_job_that_names_a_folder_outside_and_writes_nothing(place, spotfit_home):
    """A job row written straight into the state (it never passed `validate`): the controller refuses it."""
    job, outside = place
    spec = load_spec(_spec(job, checkpoint={"store": f"file://{job}/out/store"}), check_script=False)
    db = StateDB(spotfit_home / "state.db")
    doc = {**spec.model_dump(mode="json"), "base_dir": spec.base_dir}
    db.create_job("confined-1", "confined", json.dumps(doc), f"file://{outside}/store/jobs/confined-1")
    with pytest.raises(ConfigError) as info:
        Controller(db, "confined-1", for_others=True)
    assert "Invalid `checkpoint.store` in job confined-1" in info.value.message
    assert "`paths.shared`" in info.value.hint
    job_row = db.get_job("confined-1")
    assert job_row["state"] == "failed" and "configuration error" in job_row["message"]
    assert os.listdir(outside) == []


def test_on_a_shared_state_the_controller_refuses_a_recorded_store_outside_even_when_the_spec_is_inside(
        place, spotfit_home, monkeypatch, tmp_path):
    job, outside = place
    monkeypatch.setenv("SPOTFIT_STATE_URL", f"sqlite:///{tmp_path}/team.db")
    spotfit_home.mkdir(parents=True, exist_ok=True)
    (spotfit_home / "config.yaml").write_text(yaml.safe_dump({"paths": {"shared": [str(job)]}}))
    spec = load_spec(_spec(job), check_script=False)
    db = StateDB(state_target())  # the shared state's file, as every process here opens it
    doc = {**spec.model_dump(mode="json"), "base_dir": spec.base_dir}
    db.create_job("confined-2", "confined", json.dumps(doc), f"file://{job}/out/jobs/confined-2")  # via a symlink
    with pytest.raises(ConfigError) as info:
        Controller(db, "confined-2")
    assert "Invalid recorded store in job confined-2" in info.value.message
    assert "resolves to" in info.value.message and "`paths.shared`" in info.value.hint
    assert os.listdir(outside) == []
