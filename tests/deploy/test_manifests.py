"""deploy/: the controller's manifests are valid Kubernetes objects and agree with each other and
with the code (the Secret's key, the volume's path, the CLI flags, the Dockerfile's extras).

Schemas: `kubernetes-validate`'s OpenAPI-derived JSON schemas, strict (unknown fields fail).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import typer
import yaml

from spotfit.cli import app
from spotfit.host.home import STATE_URL_ENV, state_target
from tests.support.k8s_schemas import schemas

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))


def _objects(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _one(path: Path, kind: str) -> dict:
    (found,) = [o for o in _objects(path) if o["kind"] == kind]
    return found


def _container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_the_manifests_are_there():
    assert {p.name for p in MANIFESTS} == {"namespace.yaml", "rbac.yaml", "controller-postgres.yaml",
                                           "controller-sqlite.yaml", "state-secret.example.yaml"}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_object_is_valid_against_the_kubernetes_schemas(path):
    _, kubernetes_validate, version = schemas()
    objects = _objects(path)
    assert objects
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
        if obj["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "spotfit", obj["metadata"]


def test_a_broken_manifest_is_caught():
    deployment = _one(DEPLOY / "controller-postgres.yaml", "Deployment")
    deployment["spec"]["replicas"] = "two"
    _, kubernetes_validate, version = schemas()
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, version, strict=True)


def test_the_postgres_controller_reads_the_url_the_example_secret_holds():
    container = _container(_one(DEPLOY / "controller-postgres.yaml", "Deployment"))
    env = {e["name"]: e for e in container["env"]}
    ref = env[STATE_URL_ENV]["valueFrom"]["secretKeyRef"]
    secret = _one(DEPLOY / "state-secret.example.yaml", "Secret")
    assert ref["name"] == secret["metadata"]["name"]
    assert secret["stringData"][ref["key"]].startswith("postgresql://")
    assert env["SPOTFIT_CONTROLLER_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_the_sqlite_controller_is_alone_and_keeps_its_file_on_the_volume(monkeypatch):
    deployment = _one(DEPLOY / "controller-sqlite.yaml", "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"  # never two on one file
    container = _container(deployment)
    url = {e["name"]: e.get("value") for e in container["env"]}[STATE_URL_ENV]
    monkeypatch.setenv(STATE_URL_ENV, url)
    (mount,) = container["volumeMounts"]
    assert Path(state_target()).parent == Path(mount["mountPath"])
    (volume,) = spec["template"]["spec"]["volumes"]
    assert volume["name"] == mount["name"]
    pvc = _one(DEPLOY / "controller-sqlite.yaml", "PersistentVolumeClaim")
    assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


@pytest.mark.parametrize("name", ["controller-postgres.yaml", "controller-sqlite.yaml"])
def test_the_controller_runs_as_its_service_account_with_the_verb_and_flags_the_cli_has(name):
    deployment = _one(DEPLOY / name, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == _one(DEPLOY / "rbac.yaml", "ServiceAccount")["metadata"]["name"]
    verb, *flags = _container(deployment)["args"]
    command = typer.main.get_command(app).commands[verb]
    ctx = command.make_context(verb, list(flags))  # parses as `spotfit controller ...` would
    assert ctx.params["scan_s"] > 0 and ctx.params["poll_s"] > 0


def test_the_role_covers_what_attempts_are_made_of():
    role = _one(DEPLOY / "rbac.yaml", "Role")
    granted = {(group, resource): set(rule["verbs"]) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]}
    for key in (("batch", "jobs"), ("", "services"), ("", "secrets"), ("kubeflow.org", "tfjobs")):
        assert {"create", "get", "delete"} <= granted[key], key
    assert {"get", "list", "watch"} <= granted[("", "pods")]
    assert "get" in granted[("", "pods/log")]


def test_the_dockerfile_installs_this_checkouts_wheel_with_the_postgres_extra():
    text = (DEPLOY / "Dockerfile").read_text()
    root = DEPLOY.parent
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for source in sources.split():
            assert (root / source).exists(), source
    extras = re.search(r"spotfit\[([a-z0-9,-]+)\] @ file://", text)
    assert extras is not None
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "postgres" in extras.group(1).split(",") and "postgres" in declared
    assert 'CMD ["controller"]' in text
