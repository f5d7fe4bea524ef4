"""`spotfit ui`: the dashboard served by uvicorn on 127.0.0.1 (by default), behind a token, over HTTPS when given
a certificate.

The URL with the token is printed once, as Jupyter does; the access log shows paths without
their query strings (`auth.RedactQuery`), so the token is never logged.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn

from spotfit.errors import UsageError
from spotfit.ui.app import create_app
from spotfit.ui.auth import RedactQuery, choose_token


class _Server(uvicorn.Server):
    """uvicorn's server, telling `on_start` the URL once its socket listens (port 0 picks a free one)."""

    def __init__(self, config: uvicorn.Config, on_start: Callable[[str, int], None]):
        super().__init__(config)
        self._on_start = on_start

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self._on_start(host, port)


def serve(state: str | Path, host: str, port: int, on_start: Callable[[str], None],
          tls_cert: Path | None = None, tls_key: Path | None = None) -> None:
    """Serve the dashboard over the state at `state` (a SQLite path or a PostgreSQL URL) until interrupted;
    `on_start(url_with_token)` once it listens. With `tls_cert` and `tls_key` (PEM files), over HTTPS:
    the token's cookie is then `Secure`."""
    token = choose_token()
    tls = tls_cert is not None and tls_key is not None
    config = uvicorn.Config(create_app(state, token), host=host, port=port, log_level="info", access_log=True,
                            server_header=False, ssl_certfile=tls_cert if tls else None,
                            ssl_keyfile=tls_key if tls else None)
    logging.getLogger("uvicorn.access").addFilter(RedactQuery())
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if tls else "http"
    sock = bind(host, port)  # before uvicorn starts: a bind error is one line, not its log and exit 3
    _Server(config, lambda _, bound: on_start(f"{scheme}://{shown}:{bound}/?token={token}")).run(sockets=[sock])


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` (not yet listening); UsageError in one line when it cannot be."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise UsageError(f"Invalid `--host`: received {host!r}, which does not resolve here ({exc.strerror or exc}); "
                         "expected an address of this machine.",
                         hint="Leave --host out to bind 127.0.0.1, and reach it through an SSH tunnel.") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart binds at once
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"Cannot serve the dashboard on {host}:{port}: {exc.strerror or exc}; expected an address of "
                         "this machine and a free port.",
                         hint="Leave --host out to bind 127.0.0.1, or pass --port 0 to pick a free port.") from None
    return sock
