"""A GCE metadata server on 127.0.0.1, one per emulated VM.

Serves what spotfit's agent (and TensorFlow's `PreemptionCheckpointHandler`) read under
`/computeMetadata/v1/`: `instance/zone`, `instance/name`, `instance/network-interfaces/0/ip`,
`instance/attributes/*` and `instance/preempted` (`FALSE` until `preempt()`, then `TRUE`).
Every request without the header `Metadata-Flavor: Google` gets 403, as from the real server.
`?wait_for_change=true` blocks until the value differs from `last_etag` (or `timeout_sec`
passes), and every answer carries its `ETag`. Requests are counted by path.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from urllib.parse import parse_qs, urlparse

from tests.support.loopback_http import Handler, LoopbackServer

BASE = "/computeMetadata/v1"


class MetadataServer:
    """The metadata of one VM; `url` is what `SPOTFIT_METADATA_URL` points at."""

    def __init__(self, name: str, zone: str, ip: str, project_number: str = "123456789012",
                 attributes: dict[str, str] | None = None):
        self.docs = {f"{BASE}/instance/name": name, f"{BASE}/instance/zone": f"projects/{project_number}/zones/{zone}",
                     f"{BASE}/instance/network-interfaces/0/ip": ip, f"{BASE}/instance/preempted": "FALSE",
                     **{f"{BASE}/instance/attributes/{k}": v for k, v in (attributes or {}).items()}}
        self.requests: Counter[str] = Counter()
        self.refused = 0  # requests without Metadata-Flavor: Google
        self._changed = threading.Condition()
        self._http = LoopbackServer(self._handler())
        self.url = self._http.url

    def preempt(self) -> None:
        """Google's preemption notice: `instance/preempted` turns TRUE (waiters wake at once)."""
        with self._changed:
            self.docs[f"{BASE}/instance/preempted"] = "TRUE"
            self._changed.notify_all()

    def stop(self) -> None:
        with self._changed:
            self._changed.notify_all()
        self._http.stop()

    def _answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, str]:
        with self._changed:
            if path not in self.docs:
                return 404, "not found"
            if query.get("wait_for_change") == ["true"]:
                last = (query.get("last_etag") or [_etag(self.docs[path])])[0]
                timeout = float((query.get("timeout_sec") or ["60"])[0])
                self._changed.wait_for(lambda: _etag(self.docs[path]) != last, timeout=timeout)
            return 200, self.docs[path]

    def _handler(self) -> type[Handler]:
        server = self

        class Metadata(Handler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                if self.headers.get("Metadata-Flavor") != "Google":
                    server.refused += 1
                    status, text = 403, "Missing Metadata-Flavor:Google header."
                else:
                    server.requests[url.path] += 1
                    status, text = server._answer(url.path, parse_qs(url.query))
                self.reply(status, text, "application/text", {"Metadata-Flavor": "Google", "ETag": _etag(text)})

        return Metadata


def _etag(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
