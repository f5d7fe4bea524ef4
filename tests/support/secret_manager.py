"""Secret Manager's REST API (v1, the part spotfit uses) over real HTTP on 127.0.0.1, stateful.

- `POST /v1/projects/P/secrets?secretId=ID` (labels; 409 `ALREADY_EXISTS` for an id taken),
- `POST .../secrets/ID:addVersion` (base64 `payload.data`),
- `GET /v1/projects/P/secrets?filter=labels.K=V AND ...` (pages of `pageSize`, `nextPageToken`),
- `DELETE .../secrets/ID` (404 for a secret that does not exist),
- `GET .../secrets/ID/versions/latest:access`: only with `Authorization: Bearer <reader_token>`,
  the token the emulated VMs' metadata server hands out (the VM's service account); any other
  caller, the controller included, gets 403. `accessed` counts the reads; `unavailable = N`
  makes the next N reads answer 503.

The controller reaches it anonymously through `$SPOTFIT_GCP_SECRETS_ENDPOINT`. Not modelled: IAM
beyond the one token, version states, replication, etags.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.loopback_http import serve_in_thread

_PATH = re.compile(r"^/v1/projects/(?P<project>[^/]+)/secrets(?:/(?P<id>[A-Za-z0-9_-]+))?"
                   r"(?P<rest>:addVersion|/versions/latest:access)?$")


class SecretManagerApi:
    """The emulated API; `url` is the endpoint, `reader_token` what a VM must present to read a value."""

    def __init__(self, page_size: int = 2):
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}  # (project, id) -> {"labels", "versions"}
        self.reader_token = f"ya29.emulated-{secrets.token_hex(8)}"
        self.page_size = page_size
        self.accessed = 0
        self.unavailable = 0  # the next this many reads of a value answer 503 (the test's hand)
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        serve_in_thread(self._server)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def ids(self, project: str | None = None) -> list[str]:
        with self._lock:
            return sorted(sid for p, sid in self.secrets if project in (None, p))

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: dict, token: str | None
               ) -> tuple[int, dict]:
        match = _PATH.match(path)
        if match is None:
            return 404, _error(404, "NOT_FOUND", f"no such path {path}")
        project, sid, rest = match.group("project", "id", "rest")
        with self._lock:
            if sid is None and method == "POST":
                sid = (query.get("secretId") or [""])[0]
                if (project, sid) in self.secrets:
                    return 409, _error(409, "ALREADY_EXISTS", f"Secret [projects/{project}/secrets/{sid}] already "
                                                               "exists.")
                self.secrets[project, sid] = {"labels": dict(body.get("labels") or {}), "versions": []}
                return 200, self._doc(project, sid)
            if sid is None and method == "GET":
                return 200, self._list(project, query)
            if (project, sid) not in self.secrets:
                return 404, _error(404, "NOT_FOUND", f"Secret [projects/{project}/secrets/{sid}] not found.")
            secret = self.secrets[project, sid]
            if rest == ":addVersion" and method == "POST":
                secret["versions"].append(body["payload"]["data"])
                return 200, {"name": f"projects/{project}/secrets/{sid}/versions/{len(secret['versions'])}"}
            if rest == "/versions/latest:access" and method == "GET":
                if self.unavailable > 0:
                    self.unavailable -= 1
                    return 503, _error(503, "UNAVAILABLE", "The service is currently unavailable.")
                if token != self.reader_token:
                    return 403, _error(403, "PERMISSION_DENIED", "Permission 'secretmanager.versions.access' "
                                                                 "denied.")
                if not secret["versions"]:
                    return 404, _error(404, "NOT_FOUND", "no version")
                self.accessed += 1
                n = len(secret["versions"])
                return 200, {"name": f"projects/{project}/secrets/{sid}/versions/{n}",
                             "payload": {"data": secret["versions"][-1]}}
            if rest is None and method == "DELETE":
                del self.secrets[project, sid]
                return 200, {}
            if rest is None and method == "GET":
                return 200, self._doc(project, sid)
        return 405, _error(405, "METHOD_NOT_ALLOWED", f"{method} {path}")

    def _doc(self, project: str, sid: str) -> dict:
        return {"name": f"projects/{project}/secrets/{sid}", "labels": self.secrets[project, sid]["labels"],
                "replication": {"automatic": {}}}

    def _list(self, project: str, query: dict[str, list[str]]) -> dict:
        wanted = dict(re.findall(r"labels\.([\w-]+)\s*=\s*\"?([\w-]+)\"?", (query.get("filter") or [""])[0]))
        found = [self._doc(p, s) for (p, s), v in sorted(self.secrets.items())
                 if p == project and all(v["labels"].get(k) == x for k, x in wanted.items())]
        size = int((query.get("pageSize") or [self.page_size])[0])
        size = min(size, self.page_size)
        start = int((query.get("pageToken") or ["0"])[0] or 0)
        end = start + size
        return {"secrets": found[start:end], **({"nextPageToken": str(end)} if end < len(found) else {})}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                url = urlparse(self.path)
                api.calls.append((self.command, url.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                auth = self.headers.get("Authorization") or ""
                token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
                status, doc = api.handle(self.command, url.path, parse_qs(url.query), body, token)
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _error(code: int, status: str, message: str) -> dict:
    return {"error": {"code": code, "message": message, "status": status}}
