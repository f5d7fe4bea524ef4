"""`spotfit ui`: the dashboard served until interrupted, its arguments checked first.

It lives with the dashboard, not in `spotfit.sdk`: the dashboard reads jobs through the sdk, so
the sdk does not start the dashboard. FastAPI and uvicorn (the `ui` extra) load only here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spotfit.core import arguments
from spotfit.errors import UsageError
from spotfit.host.home import state_target


def ui(host: str = "127.0.0.1", port: int = 8765, on_start: Callable[[str], None] | None = None,
       tls_cert: str | None = None, tls_key: str | None = None) -> None:
    """Serve the dashboard on `host`:`port` until interrupted (`spotfit ui`; port 0 picks a free one).

    `on_start(url)` is called once it listens, with the URL that carries the access token. With
    `tls_cert` and `tls_key` (PEM files) it serves HTTPS.
    """
    arguments.number("--port", port, low=0, high=65_535, hint="Pass --port 8765.")
    arguments.text("--host", host, pattern=r"[A-Za-z0-9.:\-\[\]]+", expected="an address to bind, e.g. 127.0.0.1",
                   hint="Leave --host out to bind 127.0.0.1, and reach it from elsewhere through an SSH tunnel.")
    cert, key = _tls_pair(tls_cert, tls_key)
    try:
        from spotfit.ui.server import serve
    except ImportError as exc:
        raise UsageError(f"The dashboard needs the `ui` extra: {exc.name} is not installed.",
                         hint="pip install 'spotfit[ui]'") from None
    serve(state_target(), host, port, on_start or (lambda url: None), tls_cert=cert, tls_key=key)


def _tls_pair(cert: str | None, key: str | None) -> tuple[Path | None, Path | None]:
    """`--tls-cert` and `--tls-key` as paths, both given or neither, checked to load as a pair."""
    import ssl

    if cert is None and key is None:
        return None, None
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise UsageError(f"Invalid `{given}`: received it without `{missing}`, expected both or neither.",
                         hint="Pass --tls-cert CERT.pem --tls-key KEY.pem.")
    for flag, value in (("--tls-cert", cert), ("--tls-key", key)):
        if not Path(value).is_file():
            raise UsageError(f"Invalid `{flag}`: received {value!r}, expected a PEM file.",
                             hint=f"Pass {flag} PATH to an existing PEM file.")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise UsageError(f"Invalid `--tls-cert`/`--tls-key`: {cert!r} and {key!r} do not load as a certificate "
                         f"and its private key ({exc.__class__.__name__}), expected PEM files that match.",
                         hint="Make a pair with `openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem "
                              "-out cert.pem -subj /CN=localhost`.") from None
    return Path(cert), Path(key)
