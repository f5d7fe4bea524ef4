"""A TCP relay on loopback: 127.0.0.1:LOCAL to 127.0.0.1:REMOTE (`spotfit port-forward` on the local backend).

Both ends are loopback: nothing listens beyond this machine. Each connection gets two threads
that copy bytes until either side closes.

>>> import socket, threading
>>> echo = socket.create_server(("127.0.0.1", 0)); remote = echo.getsockname()[1]
>>> def serve():
...     conn, _ = echo.accept(); conn.sendall(conn.recv(5)); conn.close()
>>> threading.Thread(target=serve, daemon=True).start()
>>> relay = Relay(0, remote); relay.start()
>>> with socket.create_connection(("127.0.0.1", relay.local_port)) as c:
...     c.sendall(b"hello"); c.recv(5)
b'hello'
>>> relay.close(); echo.close()
"""

from __future__ import annotations

import socket
import threading


class Relay:
    """Accept on 127.0.0.1:`local_port` (0: any free port) and relay to 127.0.0.1:`remote_port`."""

    def __init__(self, local_port: int, remote_port: int):
        self.remote_port = remote_port
        self._server = socket.create_server(("127.0.0.1", local_port))
        self.local_port = self._server.getsockname()[1]
        self._closed = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._accept, name="spotfit-relay", daemon=True).start()

    def serve_forever(self) -> None:
        self._accept()

    def close(self) -> None:
        self._closed.set()
        self._server.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:  # closed
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.remote_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
