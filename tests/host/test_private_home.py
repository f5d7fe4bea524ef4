"""Private by default: what spotfit writes is its owner's alone, and no token or webhook is stored in clear."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from spotfit import interactive, sdk
from spotfit.attempt.notebook import TOKEN_ENV, token_file
from spotfit.controller import job_secrets, notify
from spotfit.errors import UsageError
from spotfit.host.home import home
from spotfit.spec.job import JobSpec, parse_spec
from spotfit.spec.rules import Notify
from spotfit.state.db import StateDB
from spotfit.stores import open_store
from spotfit.stores.fsspec_store import FsspecStore

HOOK = "https://hooks.slack.com/services/T0CANARY1/B0CANARY2/canaryXXXXXXXXXXXXXXXXXX"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    """The umask most shells have (022): what spotfit makes must be private even so."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_home_state_db_and_its_wal_are_the_owner_s_alone(spotfit_home, open_umask):
    db = StateDB(str(home() / "state.db"))
    db.create_job("j-1", "j", "{}", "memory://x", "pending")
    db.add_event("j-1", "note", "a write, so that the WAL exists")
    files = {p.name: _mode(p) for p in spotfit_home.iterdir()}
    assert _mode(spotfit_home) == 0o700
    assert {"state.db", "state.db-wal", "state.db-shm"} <= set(files), files
    assert {name: mode for name, mode in files.items() if mode != 0o600} == {}
    db.close()


def test_a_file_store_writes_0600_files_in_0700_folders(tmp_path, open_umask):
    root = tmp_path / "store"
    store = FsspecStore(f"file://{root}")
    store.write_bytes("jobs/j/ckpt/0001/weights.bin", b"w")
    assert store.create_exclusive("jobs/j/lease", b"x")
    made = [root, *root.rglob("*")]
    assert {str(p): oct(_mode(p)) for p in made if p.is_dir() and _mode(p) != 0o700} == {}
    assert {str(p): oct(_mode(p)) for p in made if p.is_file() and _mode(p) != 0o600} == {}


def test_an_open_home_gets_one_warning_line_with_the_chmod(spotfit_home):
    spotfit_home.mkdir()
    spotfit_home.chmod(0o755)
    env = {**os.environ, "SPOTFIT_HOME": str(spotfit_home)}
    out = subprocess.run([sys.executable, "-m", "spotfit", "list", "--json"], capture_output=True, text=True,
                         timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    json.loads(out.stdout)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and f"chmod -R go-rwx {spotfit_home}" in lines[0] and "0755" in lines[0], out.stderr
    spotfit_home.chmod(0o700)
    quiet = subprocess.run([sys.executable, "-m", "spotfit", "list", "--json"], capture_output=True, text=True,
                           timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_the_cli_runs_under_a_private_umask(spotfit_home, tmp_path):
    """Whatever the CLI and the processes it starts create (logs, the controller's files) is 0600 / 0700."""
    code = ("import importlib, os; a = importlib.import_module('spotfit.cli.app'); "
            "a.app = lambda: print(oct(os.umask(0o077))); a.main()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "0o77", out.stderr


def _notebook_spec(tmp_path: Path, extra: str = "") -> Path:
    spec = tmp_path / "nb" / "notebook.yaml"
    spec.parent.mkdir()
    spec.write_text("name: nb\nkind: notebook\nmarket: {trace: null}\n" + extra)
    return spec


def test_a_notebook_token_is_never_in_the_store_and_goes_when_the_job_ends(tmp_path, spotfit_home, open_umask):
    job_id = interactive.notebook(str(_notebook_spec(tmp_path)), backend="local")
    path = token_file(job_id)
    token = path.read_text().strip()
    assert len(token) >= 32 and _mode(path) == 0o600 and _mode(path.parent) == 0o700
    store = open_store(sdk.status(job_id)["store"])
    assert not store.exists("notebook/token")
    assert [k for k in store.list() if token.encode() in store.read_bytes(k)] == []
    assert token not in sdk.db().get_job(job_id)["spec_json"]
    spec = JobSpec.model_validate(json.loads(sdk.db().get_job(job_id)["spec_json"]))

    job_secrets.release(object(), sdk.db(), job_id, spec, "stopped")  # a stopped notebook may resume
    assert path.is_file()
    job_secrets.release(object(), sdk.db(), job_id, spec, "cancelled")
    assert not path.exists()


def test_a_notebook_on_kubernetes_gets_its_token_in_the_attempt_secret(tmp_path, spotfit_home):
    from spotfit.backends.base import LaunchRequest, backend_options
    from spotfit.backends.kubernetes import manifests as mf
    from spotfit.backends.kubernetes.backend import KubernetesBackend

    spec = parse_spec({"name": "nb", "kind": "notebook", "backend": "kubernetes"}, source="nb.yaml")
    request = LaunchRequest(job_id="nb-1", attempt=1, job_url="s3://b/jobs/nb-1", zone=None, market="spot",
                            options=backend_options(spec))
    s = KubernetesBackend().settings(request)
    assert TOKEN_ENV in s.secret_env
    (secret, *_), token = mf.attempt_objects(s, {TOKEN_ENV: "t0ken"}), "t0ken"
    assert secret["kind"] == "Secret" and secret["stringData"] == {TOKEN_ENV: token}


def test_a_literal_webhook_is_redacted_in_every_dump_and_kept_in_memory(tmp_path, spotfit_home, monkeypatch):
    (tmp_path / "train.py").write_text("print('hi')\n")
    spec_path = tmp_path / "spotfit.yaml"
    spec_path.write_text(f"name: hook\nscript: train.py\nmarket: {{trace: null}}\nnotify: {{webhook: '{HOOK}'}}\n")
    spec = sdk.validate(str(spec_path))
    assert spec.model_dump()["notify"]["webhook"] == "https://hooks.slack.com/services/T…/***"
    assert "canary" not in spec.model_dump_json()
    job_id = sdk.submit(str(spec_path))
    env_name = job_secrets.webhook_env(job_id)
    monkeypatch.setenv(env_name, os.environ[env_name])  # undone after the test
    stored = sdk.db().get_job(job_id)["spec_json"] + open_store(sdk.status(job_id)["store"]).read_bytes(
        "spec.json").decode() + json.dumps(sdk.status(job_id))
    assert "canary" not in stored and "services/T…/***" in stored
    kept = JobSpec.model_validate(json.loads(sdk.db().get_job(job_id)["spec_json"]))
    assert notify.webhook_for(sdk.db(), job_id, kept.notify) == HOOK  # from the environment it was kept in
    assert env_name not in os.environ  # taken into memory: no attempt inherits it
    assert notify.webhook_for(sdk.db(), job_id, kept.notify) == HOOK


def test_a_webhook_named_as_a_secret_is_read_from_the_environment(tmp_path, spotfit_home, monkeypatch):
    notify_spec = Notify.model_validate({"webhook": {"secret": "SPOTFIT_TEST_HOOK"}})
    monkeypatch.delenv("SPOTFIT_TEST_HOOK", raising=False)
    with pytest.raises(UsageError, match="SPOTFIT_TEST_HOOK"):
        job_secrets.keep_webhook("j-1", notify_spec, shared=False)
    monkeypatch.setenv("SPOTFIT_TEST_HOOK", HOOK)
    job_secrets.keep_webhook("j-1", notify_spec, shared=False)
    assert notify_spec.model_dump() == {"webhook": {"secret": "SPOTFIT_TEST_HOOK"}, "sinks": []}  # unresolved
    db = sdk.db()
    db.create_job("j-1", "j", "{}", "memory://x", "pending")
    assert notify.webhook_for(db, "j-1", notify_spec) == HOOK
    monkeypatch.delenv("SPOTFIT_TEST_HOOK")
    assert notify.webhook_for(db, "j-1", notify_spec) is None
    assert [e["kind"] for e in db.events("j-1")] == ["notify_unavailable"]


def test_a_literal_webhook_is_refused_on_a_shared_state():
    with pytest.raises(UsageError, match="shared state") as info:
        job_secrets.keep_webhook("j-1", Notify.model_validate({"webhook": HOOK}), shared=True, environ={})
    assert "{secret: NAME}" in info.value.hint and "canary" not in info.value.message
