"""A job's secrets on gcp: Secret Manager secrets made by the controller, read by the VM's agent only.

Against the Secret Manager emulator over HTTP on 127.0.0.1 (tests/support/secret_manager.py) and
a metadata server (tests/support/gce_metadata.py) that hands out the VM's token. The end-to-end
canary (the value written nowhere else) is in test_gcp_emulated.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from spotfit.backends.gcp.backend import GcpBackend
from spotfit.backends.gcp.secrets import TOKEN_PATH, SecretManager, agent_env, secret_id
from spotfit.errors import BackendError
from spotfit.spec.job import load_spec
from spotfit.stores import open_store
from tests.support.gce_metadata import MetadataServer
from tests.support.secret_manager import SecretManagerApi

pytestmark = pytest.mark.emulated_instance
PROJECT = "spotfit-test"
VALUE = "canary-2f9d4e1b7a3c6e58-gcp-unit"
SPEC = """
name: digits
script: train.py
backend: gcp
secrets: [API_TOKEN, OTHER]
gcp: {project: spotfit-test}
"""


@pytest.fixture
def api() -> Iterator[SecretManagerApi]:
    server = SecretManagerApi()
    yield server
    server.stop()


@pytest.fixture
def vm(api, monkeypatch) -> Iterator[MetadataServer]:
    """A VM's metadata server whose service account's token the emulator accepts."""
    server = MetadataServer("vm-1", "us-central1-a", "10.128.0.2")
    server.docs[TOKEN_PATH] = json.dumps({"access_token": api.reader_token, "expires_in": 3599})
    monkeypatch.setenv("SPOTFIT_GCP_SECRETS_ENDPOINT", api.url)
    yield server
    server.stop()


def test_the_controller_stores_labelled_secrets_and_the_vm_reads_them(api, vm, job, job_spec):
    backend = GcpBackend(secrets_endpoint=api.url)
    spec = load_spec(job_spec(SPEC))
    store = open_store(job)
    backend.put_job_secrets("Digits-1", {"API_TOKEN": VALUE, "OTHER": "two"}, spec, store)
    assert api.ids(PROJECT) == sorted([secret_id("Digits-1", "API_TOKEN"), secret_id("Digits-1", "OTHER")])
    assert {json.dumps(s["labels"], sort_keys=True) for s in api.secrets.values()} == {
        '{"spotfit-job": "digits-1", "spotfit-managed": "true"}'}
    pointer = store.read_bytes("secrets.json")
    assert VALUE.encode() not in pointer and json.loads(pointer)["project"] == PROJECT
    assert agent_env(store, vm.url) == {"API_TOKEN": VALUE, "OTHER": "two"}
    assert vm.requests[TOKEN_PATH] == 1 and vm.refused == 0 and api.accessed == 2

    backend.delete_job_secrets("Digits-1", spec)
    assert api.ids() == []
    with pytest.raises(RuntimeError, match="could not be read from Secret Manager"):
        agent_env(store, vm.url)


def test_only_the_vms_token_reads_a_value(api, vm, job):
    manager = SecretManager(PROJECT, api.url)
    ids = manager.put("job-1", {"API_TOKEN": VALUE})
    answer = manager.http.get(f"{manager.base}/{ids['API_TOKEN']}/versions/latest:access")
    assert answer.status_code == 403  # the controller (anonymous here) cannot read values back
    vm.docs[TOKEN_PATH] = json.dumps({"access_token": "ya29.someone-else"})
    from spotfit.backends.gcp.secrets import write_pointer

    write_pointer(open_store(job), PROJECT, ids)
    with pytest.raises(RuntimeError, match="HTTP 403.*secretAccessor"):
        agent_env(open_store(job), vm.url)


def test_the_agent_tries_a_read_again_while_secret_manager_is_unavailable(api, vm, job, monkeypatch):
    from spotfit.backends.gcp import secrets
    from spotfit.backends.gcp.secrets import write_pointer

    pauses: list[float] = []
    monkeypatch.setattr(secrets, "_pause", pauses.append)  # the back-off recorded, not slept (1 + 2 + 4 s)
    ids = SecretManager(PROJECT, api.url).put("job-1", {"API_TOKEN": VALUE})
    write_pointer(open_store(job), PROJECT, ids)
    api.unavailable = 2
    assert agent_env(open_store(job), vm.url) == {"API_TOKEN": VALUE}
    assert api.unavailable == 0 and api.accessed == 1 and pauses == [1.0, 2.0]
    pauses.clear()
    api.unavailable = 4  # more than the agent's four tries: the attempt fails with the HTTP status
    with pytest.raises(RuntimeError, match="HTTP 503"):
        agent_env(open_store(job), vm.url)
    assert pauses == [1.0, 2.0, 4.0]


def test_a_job_without_secrets_reads_nothing(vm, job):
    assert agent_env(open_store(job), vm.url) == {}
    assert vm.requests[TOKEN_PATH] == 0


def test_listing_pages_and_a_retried_put_adds_a_version(api):
    manager = SecretManager(PROJECT, api.url)
    manager.put("job-1", {f"N{i}": str(i) for i in range(5)})  # the emulator pages by 2
    manager.put("job-2", {"N0": "x"})
    assert len(list(manager.find())) == 6 and len(list(manager.find("job-1"))) == 5
    manager.put("job-2", {"N0": "y"})
    assert api.secrets[PROJECT, secret_id("job-2", "N0")]["versions"] == ["eA==", "eQ=="]
    assert manager.delete_job("job-1") == [secret_id("job-1", f"N{i}") for i in range(5)]
    manager.delete(secret_id("job-1", "N0"))  # already gone: fine
    assert api.ids() == [secret_id("job-2", "N0")]


def test_an_unreachable_secret_manager_is_one_backend_error(job, job_spec):
    backend = GcpBackend(secrets_endpoint="http://127.0.0.1:9")
    with pytest.raises(BackendError, match=r"Could not store the job's secrets in Secret Manager \(spotfit-test\)"):
        backend.put_job_secrets("job-1", {"API_TOKEN": VALUE}, load_spec(job_spec(SPEC)), open_store(job))


def test_secrets_the_end_of_a_job_could_not_delete_are_an_event_naming_gc(job_spec):
    from spotfit import sdk
    from spotfit.controller.job_secrets import release

    spec = load_spec(job_spec(SPEC))
    sdk.db().create_job("job-1", "digits", spec.model_dump_json(), "file:///tmp/job-1")
    release(GcpBackend(secrets_endpoint="http://127.0.0.1:9"), sdk.db(), "job-1", spec, "completed")
    [event] = [e for e in sdk.events("job-1") if e["kind"] == "secrets_left"]
    assert "Could not delete the job's secrets from Secret Manager (spotfit-test)" in event["message"]
    assert "`spotfit gc --backend gcp` deletes them later" in event["message"]
