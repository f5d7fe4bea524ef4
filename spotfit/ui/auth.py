"""The dashboard's access token, checked on every request, and kept out of the logs.

As Jupyter does: the URL printed at start carries `?token=...`; the first page opened with
it sets an HttpOnly, SameSite=Strict cookie and redirects to the same URL without the token,
so the token leaves the address bar; scripts send `Authorization: token ...` (or `Bearer`).
Every route, pages, `/api/` and static files alike, answers 401 without a valid token.
uvicorn's access log prints each request's path: `RedactQuery` drops the query string from it.

Example:

>>> allowed("s3cret", query="s3cret", header="", cookie=None), allowed("s3cret", None, "Bearer nope", None)
(True, False)
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

TOKEN_ENV = "SPOTFIT_UI_TOKEN"
COOKIE = "spotfit_ui_token"


def choose_token() -> str:
    """`$SPOTFIT_UI_TOKEN`, else a new random token (for this start only)."""
    return os.environ.get(TOKEN_ENV) or secrets.token_urlsafe(24)


def allowed(token: str, query: str | None, header: str, cookie: str | None) -> bool:
    """Whether any of the request's credentials is the token (compared in constant time)."""
    scheme, _, value = header.partition(" ")
    given = [query, cookie, value.strip() if scheme.lower() in ("token", "bearer") else None]
    return any(g is not None and secrets.compare_digest(g.encode(), token.encode()) for g in given)


class TokenGate:
    """ASGI middleware: 401 without the token; a page opened with `?token=` sets the cookie and redirects."""

    def __init__(self, app: ASGIApp, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        query = request.query_params.get("token")
        if not allowed(self.token, query, request.headers.get("authorization", ""), request.cookies.get(COOKIE)):
            response: Response = PlainTextResponse(
                "401: this spotfit dashboard needs its token: open the URL `spotfit ui` printed "
                "(or send `Authorization: token ...`).", status_code=401)
            await response(scope, receive, send)
            return
        if query is not None and request.method == "GET" and not request.url.path.startswith("/api/"):
            rest = request.url.remove_query_params("token")
            response = RedirectResponse(rest.path + (f"?{rest.query}" if rest.query else ""), status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
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
