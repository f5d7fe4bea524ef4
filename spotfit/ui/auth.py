"""The dashboard's access token, checked on every request, and kept out of the logs.

As Jupyter does: the URL printed at start carries `?token=...`; any GET with it (a page, an
`/api/` document, a TensorBoard page) sets an HttpOnly, SameSite=Strict cookie (`Secure` when
served over TLS) and redirects to the same URL without the token, so the token leaves the
address bar and the history; scripts send `Authorization: token ...` (or `Bearer`). A query
token is taken on GET alone. Every route, pages, `/api/` and static files alike, answers 401
without a valid token. The gate tells the CSRF guard behind it which credential the request
showed (`guard.CREDENTIAL`): the cookie, which a browser sends by itself, or a header, which it
does not. uvicorn's access log prints each request's path: `RedactQuery` drops the query string from it.

Example:

>>> credential("s3cret", query="s3cret", header="", cookie=None), credential("s3cret", None, "Bearer nope", None)
('query', None)
>>> redact_path("/jobs/x?token=s3cret&state=all")
'/jobs/x'
"""

from __future__ import annotations

import logging
import os
import secrets

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from spotfit.ui.guard import CREDENTIAL

TOKEN_ENV = "SPOTFIT_UI_TOKEN"
COOKIE = "spotfit_ui_token"


def choose_token() -> str:
    """`$SPOTFIT_UI_TOKEN`, else a new random token (for this start only)."""
    return os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24)


def credential(token: str, query: str | None, header: str, cookie: str | None) -> str | None:
    """Which of the request's credentials is the token ("header", "cookie" or "query"), compared in
    constant time; None when none is."""
    scheme, _, value = header.partition(" ")
    given = {"header": value.strip() if scheme.lower() in ("token", "bearer") else None, "cookie": cookie,
             "query": query}
    return next((name for name, g in given.items()
                 if g is not None and secrets.compare_digest(g.encode(), token.encode())), None)


class TokenGate:
    """ASGI middleware: 401 without the token; a GET with `?token=` sets the cookie and redirects."""

    def __init__(self, app: ASGIApp, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        query = request.query_params.get("token") if request.method in ("GET", "HEAD") else None
        shown = credential(self.token, query, request.headers.get("authorization", ""), request.cookies.get(COOKIE))
        if shown is None:
            response: Response = PlainTextResponse(
                "401: this spotfit dashboard needs its token: open the URL `spotfit ui` printed "
                "(or send `Authorization: token ...`).", status_code=401)
            await response(scope, receive, send)
            return
        if "token" in request.query_params and request.method in ("GET", "HEAD"):
            rest = request.url.remove_query_params("token")
            response = RedirectResponse(rest.path + (f"?{rest.query}" if rest.query else ""), status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
            await response(scope, receive, send)
            return
        scope[CREDENTIAL] = "cookie" if shown == "cookie" else "header"
        await self.app(scope, receive, send)


def redact_path(path: str) -> str:
    """A request path without its query string (which may hold the token)."""
    return path.split("?", 1)[0]


class RedactQuery(logging.Filter):
    """Drops query strings from uvicorn's access log lines (its record args: client, method, path, ...)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3 and isinstance(record.args[2], str):
            record.args = (*record.args[:2], redact_path(record.args[2]), *record.args[3:])
        return True
