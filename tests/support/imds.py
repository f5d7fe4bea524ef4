"""An instance metadata service (IMDSv2 only) on 127.0.0.1, one per emulated instance.

Serves what spotfit's agent and an EC2 instance read: a session token (`PUT
/latest/api/token` with a TTL header; reads without the token get 401, as with
`HttpTokens: required`), `instance-id`, `placement/availability-zone`, `local-ipv4`,
`spot/instance-action` (404 until `interrupt()` publishes the two-minute notice, scaled) and
`events/recommendations/rebalance` (404 until a rebalance recommendation or an interruption).
Every request is counted by path, so a test can tell that the agent polled with a token.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter
from datetime import UTC, datetime

from tests.support.loopback_http import Handler, LoopbackServer

META = "/latest/meta-data"
NOTICE_PATH = f"{META}/spot/instance-action"
REBALANCE_PATH = f"{META}/events/recommendations/rebalance"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ImdsServer:
    """The metadata of one instance; `url` is what `SPOTFIT_IMDS_URL` points at."""

    def __init__(self, instance_id: str, zone: str, local_ip: str):
        self.docs = {f"{META}/instance-id": instance_id, f"{META}/placement/availability-zone": zone,
                     f"{META}/local-ipv4": local_ip}
        self.token = secrets.token_hex(16)
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._http = LoopbackServer(self._handler())
        self.url = self._http.url

    def interrupt(self, notice_s: float) -> None:
        """Publish a spot interruption: the instance is reclaimed `notice_s` from now."""
        with self._lock:
            at = _iso(time.time() + notice_s)
            self.docs[NOTICE_PATH] = json.dumps({"action": "terminate", "time": at})
            self.docs.setdefault(REBALANCE_PATH, json.dumps({"noticeTime": _iso(time.time())}))

    def recommend_rebalance(self) -> None:
        with self._lock:
            self.docs[REBALANCE_PATH] = json.dumps({"noticeTime": _iso(time.time())})

    def stop(self) -> None:
        self._http.stop()

    def _handler(self) -> type[Handler]:
        imds = self

        class Imds(Handler):
            def do_PUT(self):
                imds.requests[f"PUT {self.path}"] += 1
                ok = self.path == "/latest/api/token" and "X-aws-ec2-metadata-token-ttl-seconds" in self.headers
                self.reply(200 if ok else 400, imds.token if ok else "")

            def do_GET(self):
                if self.headers.get("X-aws-ec2-metadata-token") != imds.token:
                    imds.requests[f"GET {self.path} (no token)"] += 1
                    self.reply(401)
                    return
                imds.requests[f"GET {self.path}"] += 1
                with imds._lock:
                    body = imds.docs.get(self.path)
                self.reply(200 if body is not None else 404, body or "")

        return Imds
