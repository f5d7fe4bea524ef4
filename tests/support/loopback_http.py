"""A threaded HTTP server on 127.0.0.1 (a free port), the base of the tests' cloud emulators.

Each emulator (Compute Engine, its metadata server, the Billing Catalog, EC2's IMDS) writes only
its handler; `LoopbackServer` binds it to 127.0.0.1 on a port the OS picks, serves it from a
daemon thread and stops it (`stop()`, or the `with` block's end). `Handler` answers with
`reply` and keeps the test's output free of one log line per request.

Example:

>>> import urllib.request
>>> class Hello(Handler):
...     def do_GET(self):
...         self.reply(200, "hello")
>>> with LoopbackServer(Hello) as server:
...     urllib.request.urlopen(server.url, timeout=10).read()
b'hello'
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any

# How often a serving thread looks for `shutdown()`: `serve_forever`'s default, 0.5 s, held every
# test's teardown that long (about 7 s of each worker's `make check`).
SHUTDOWN_POLL_S = 0.02


def serve_in_thread(server: BaseServer) -> threading.Thread:
    """Serve `server` from a started daemon thread; its `shutdown()` returns within `SHUTDOWN_POLL_S`."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True)
    thread.start()
    return thread


class Handler(BaseHTTPRequestHandler):
    """A request handler with `reply` and no access log."""

    def reply(self, status: int, body: str | bytes = b"", content_type: str | None = None,
              headers: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for name, value in {**({"Content-Type": content_type} if content_type else {}), **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class LoopbackServer:
    """`handler` served on 127.0.0.1 at `url` until `stop()`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self._server = _QuietServer(("127.0.0.1", 0), handler)
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        serve_in_thread(self._server)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    """A client that went away mid-answer (a VM killed during a long poll) is no error worth a traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
