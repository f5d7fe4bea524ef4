"""A job's secrets on Google Cloud: Secret Manager secrets that only the VMs' service account reads.

`spotfit run` reads each name of the spec's `secrets:` from the submitting shell; the controller
creates one secret per name, `spotfit-<job>-<hash>-<NAME>` (`secret_id`), labelled
`spotfit-managed=true` and `spotfit-job=<job>`, and adds the value as its first version.
Nothing else carries the values: not the spec, the state DB, the store, the startup script, the
instance metadata or an event. The job's `secrets.json` in its store names the project and the
secret ids (no value); the instance agent reads the values with the VM's service account
(`agent_env`: an access token from the metadata server, then `versions/latest:access`) and
passes them to the script's environment only. The controller never reads them back: when the
job ends it lists the job's secrets by label and deletes them; `spotfit gc --backend gcp`
deletes those of ended jobs that were left.

REST calls through `requests` (google-cloud-secret-manager is not a dependency): the controller
sends them with Application Default Credentials (`AuthorizedSession`), or none to another
endpoint (`$SPOTFIT_GCP_SECRETS_ENDPOINT`: the tests' emulator); the agent with the VM's token
and plain urllib.

Example:

>>> secret_id("Digits-20260101-120000-ab12", "WANDB_API_KEY")
'spotfit-digits-20260101-120000-ab12-6027-WANDB_API_KEY'
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypedDict

from spotfit.attempt import layout
from spotfit.backends.gcp.launch import LABEL_JOB, LABEL_MANAGED, label_value
from spotfit.errors import NotFoundError

if TYPE_CHECKING:
    import requests
    from google.auth.credentials import Credentials

    from spotfit.stores.base import ObjectStore

ENDPOINT_ENV = "SPOTFIT_GCP_SECRETS_ENDPOINT"
DEFAULT_ENDPOINT = "https://secretmanager.googleapis.com"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # the only scope Secret Manager accepts
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
POINTER_KEY = layout.SECRETS


class ManagedSecret(TypedDict):
    """A secret spotfit made, as `SecretManager.find` lists it: its id and labels, never a value."""

    id: str
    labels: dict[str, str]


def endpoint(given: str | None = None) -> str:
    return (given or os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).rstrip("/")


def secret_id(job_id: str, name: str) -> str:
    """The id of one secret of a job: `[A-Za-z0-9_-]`, at most 255 characters, unique per (job, name)."""
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:4]
    stem = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")[:100].rstrip("-")
    return f"spotfit-{stem}-{digest}-{re.sub(r'[^A-Za-z0-9_-]', '_', name)}"


def session(endpoint_url: str | None, credentials: Credentials | None = None) -> requests.Session:
    """A `requests` session for the controller's calls: anonymous to another endpoint, else ADC's."""
    import requests

    if credentials is None and endpoint(endpoint_url) != DEFAULT_ENDPOINT:
        return requests.Session()
    from google.auth.transport.requests import AuthorizedSession

    if credentials is None:
        import google.auth

        credentials, _ = google.auth.default(scopes=[SCOPE])
    return AuthorizedSession(credentials)  # type: ignore[no-untyped-call, unused-ignore]  # google-auth: untyped


class SecretManager:
    """The controller's side: create, list (names and labels only) and delete a project's secrets."""

    def __init__(self, project: str, endpoint_url: str | None = None, credentials: Credentials | None = None,
                 http: requests.Session | None = None):
        self.project = project
        self.base = f"{endpoint(endpoint_url)}/v1/projects/{project}/secrets"
        self.http = http or session(endpoint_url, credentials)

    def put(self, job_id: str, values: dict[str, str]) -> dict[str, str]:
        """One secret per value, labelled with the job; returns {NAME: secret id}. A secret that exists
        already (a retried submit) gets the value as a new version."""
        ids: dict[str, str] = {}
        for name, value in sorted(values.items()):
            sid = secret_id(job_id, name)
            answer = self.http.post(self.base, params={"secretId": sid}, json={
                "replication": {"automatic": {}},
                "labels": {LABEL_MANAGED: "true", LABEL_JOB: label_value(job_id)}})
            if answer.status_code != 409:
                answer.raise_for_status()
            data = base64.b64encode(value.encode()).decode()
            self.http.post(f"{self.base}/{sid}:addVersion", json={"payload": {"data": data}}).raise_for_status()
            ids[name] = sid
        return ids

    def find(self, job_id: str | None = None) -> Iterator[ManagedSecret]:
        """The secrets spotfit made ({"id", "labels"}), `job_id`'s only when given; never a value."""
        query = f"labels.{LABEL_MANAGED}=true" + (f" AND labels.{LABEL_JOB}={label_value(job_id)}" if job_id else "")
        token = ""
        while True:
            params = {"filter": query, "pageSize": "100", **({"pageToken": token} if token else {})}
            answer = self.http.get(self.base, params=params)
            answer.raise_for_status()
            doc = answer.json()
            for item in doc.get("secrets", []):
                yield {"id": item["name"].rsplit("/", 1)[-1], "labels": item.get("labels", {})}
            token = doc.get("nextPageToken") or ""
            if not token:
                return

    def delete(self, sid: str) -> None:
        """Delete one secret and its versions; one already gone is fine."""
        answer = self.http.delete(f"{self.base}/{sid}")
        if answer.status_code != 404:
            answer.raise_for_status()

    def delete_job(self, job_id: str) -> list[str]:
        """Delete the job's secrets; returns their ids."""
        found = [s["id"] for s in self.find(job_id)]
        for sid in found:
            self.delete(sid)
        return found


def write_pointer(store: ObjectStore, project: str, ids: dict[str, str]) -> None:
    """The job's `secrets.json`: where the agents find the values (project, secret ids; never a value)."""
    store.write_bytes(POINTER_KEY, json.dumps({"cloud": "gcp", "project": project, "secrets": ids}).encode())


def agent_env(store: ObjectStore, metadata_url: str, timeout_s: float = 10.0) -> dict[str, str]:
    """On the VM: the attempt's secrets, read from Secret Manager with the VM's service account ({} without any).

    The access token comes from the metadata server (`Metadata-Flavor: Google`); the value goes
    into the returned dict only.
    """
    try:
        doc = json.loads(store.read_bytes(POINTER_KEY))
    except NotFoundError:
        return {}
    req = urllib.request.Request(f"{metadata_url.rstrip('/')}{TOKEN_PATH}", headers={"Metadata-Flavor": "Google"})
    try:
        token = json.loads(_read(req, timeout_s))["access_token"]
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        raise RuntimeError(f"no access token of the VM's service account from the metadata server ({exc}): "
                           "the VM needs `gcp.service_account` to read its secrets (docs/gcp.md#secrets)") from None
    values = {}
    for name, sid in sorted(doc["secrets"].items()):
        url = f"{endpoint()}/v1/projects/{doc['project']}/secrets/{sid}/versions/latest:access"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        try:
            payload = json.loads(_read(req, timeout_s))["payload"]["data"]
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"secret {name} ({sid}) could not be read from Secret Manager in project "
                               f"{doc['project']}: HTTP {exc.code}; deleted, or the VM's service account lacks "
                               "roles/secretmanager.secretAccessor or the cloud-platform scope "
                               "(docs/gcp.md#secrets)") from None
        values[name] = base64.b64decode(payload).decode()
    return values


def _read(req: urllib.request.Request, timeout_s: float, tries: int = 4, pause_s: float = 1.0) -> bytes:
    """The body of `req`; a refused connection, a timeout, 429 or a 5xx is tried again (1, 2, 4 s apart)."""
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                return bytes(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code != 429 and exc.code < 500 or attempt == tries - 1:
                raise
        except (urllib.error.URLError, OSError):
            if attempt == tries - 1:
                raise
        _pause(pause_s * 2 ** attempt)
    raise AssertionError("unreachable")


_pause = time.sleep  # the wait between tries (a test records the back-off here instead of sleeping it)
