"""A webhook receiver on 127.0.0.1 that keeps every JSON payload posted to it (for `notify:` tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.loopback_http import serve_in_thread


@contextmanager
def webhook_receiver() -> Iterator[tuple[str, list]]:
    """Serve until the block ends: (the hook's URL, the list its received payloads are appended to)."""
    received: list = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()
