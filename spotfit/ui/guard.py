"""What every response carries and what every state-changing request must show.

`SecurityHeaders` (outermost: 401s carry them too) adds a Content-Security-Policy (scripts from
the dashboard itself, no inline script; plotly.js styles its charts inline), `X-Frame-Options`,
`X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer` to every response. A
TensorBoard page served through the proxy keeps TensorBoard's own CSP (its app needs `eval` and
inline styles) and may be framed by the same origin only (TensorBoard frames its dynamic plugins).

`CsrfGuard` (inside the token gate, which says how the request was authenticated) answers 403 to a
POST, PUT, PATCH or DELETE whose `Origin` is another origin, or whose `Sec-Fetch-Site` is not
same-origin; then, where the credential was the cookie (a browser's: it comes with any request the
browser sends), it asks for the CSRF token, in the `X-CSRF-Token` header or a form's `csrf` field.
The token is derived from the access token (`csrf_token`), so every page of this dashboard holds
it and no other site can read it. TensorBoard's own requests through the proxy carry its custom
`X-XSRF-Protected: 1` header instead, which a page of another origin cannot send without a CORS
preflight that the dashboard never grants.

Example:

>>> len(csrf_token("s3cret")) == 43 and csrf_token("s3cret") != csrf_token("other")
True
>>> same_origin("http://127.0.0.1:8765", "http", "127.0.0.1:8765"), same_origin("http://evil.example", "http", "x")
(True, False)
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from urllib.parse import parse_qs

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CREDENTIAL = "spotfit.credential"  # the scope key the token gate sets: "header" or "cookie"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TENSORBOARD_PATH = re.compile(r"/jobs/[^/]+/tensorboard/")  # the proxy's paths (not the POST that starts it)
MAX_FORM_BYTES = 2 << 20  # a form's body read to find its CSRF field (the plan form's spec is capped below it)
CSP = "; ".join([
    "default-src 'none'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:",
    "connect-src 'self'", "font-src 'self'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'",
])
HEADERS = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}


def csrf_token(token: str) -> str:
    """The CSRF token of the dashboard whose access token is `token` (HMAC-SHA256, URL-safe base64)."""
    digest = hmac.new(token.encode(), b"spotfit-ui-csrf", hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether `origin` (an `Origin` header) is the dashboard's own: `scheme://host` as the request came."""
    return origin.lower() == f"{scheme}://{host}".lower()


class SecurityHeaders:
    """ASGI middleware: the CSP and the framing, sniffing and referrer headers on every response."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        proxied = TENSORBOARD_PATH.match(scope["path"]) is not None

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
                headers["x-frame-options"] = "SAMEORIGIN" if proxied else "DENY"
                # Under the proxy TensorBoard's pages keep its CSP, and its scripts (a worker's CSP is its own) none;
                # the dashboard's own pages there (a 401, a 404) get the dashboard's.
                ours = not proxied or (headers.get("content-type", "").startswith("text/html")
                                       and "content-security-policy" not in headers)
                if ours:
                    headers["content-security-policy"] = CSP
            await send(message)

        await self.app(scope, receive, send_with_headers)


class CsrfGuard:
    """ASGI middleware: 403 for a state-changing request from another origin or without the CSRF token."""

    def __init__(self, app: ASGIApp, token: str):
        self.app, self.csrf = app, csrf_token(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin, site = headers.get("origin"), headers.get("sec-fetch-site")
        # Under `Referrer-Policy: no-referrer` a browser's own form posts say `Origin: null`: the token decides.
        if origin not in (None, "null") and not same_origin(origin, scope["scheme"], headers.get("host", "")):
            await _forbid("another origin", scope, receive, send)
            return
        if site not in (None, "same-origin", "none"):
            await _forbid(f"a {site} page", scope, receive, send)
            return
        if scope.get(CREDENTIAL) != "cookie":  # a script's Authorization header: no browser sends it by itself
            await self.app(scope, receive, send)
            return
        if TENSORBOARD_PATH.match(scope["path"]) and headers.get("x-xsrf-protected") == "1":
            await self.app(scope, receive, send)
            return
        given = headers.get("x-csrf-token")
        if given is None and headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            body = await _read(receive)
            if body is None:
                await PlainTextResponse("413: this form is too large.", status_code=413)(scope, receive, send)
                return
            given = parse_qs(body.decode("latin-1")).get("csrf", [None])[0]
            receive = _replay(body, receive)
        if given is None or not secrets.compare_digest(given.encode(), self.csrf.encode()):
            await _forbid("a page without this dashboard's CSRF token", scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _forbid(source: str, scope: Scope, receive: Receive, send: Send) -> None:
    response = PlainTextResponse(f"403: this dashboard takes no {scope['method']} from {source}: use its own pages "
                                 "(or send `Authorization: token ...` from a script).", status_code=403)
    await response(scope, receive, send)


async def _read(receive: Receive) -> bytes | None:
    """The whole body, or None once it passes `MAX_FORM_BYTES`."""
    body = bytearray()
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_FORM_BYTES:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, server: Receive) -> Receive:
    """A `receive` that hands the app the body already read, then the server's messages (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await server()

    return receive
