"""The console token: state-changing requests need it, reads do not.

The token is random per start (``secrets.token_urlsafe``), printed at start-up
and written to the state file for the CLI. A request carries it as
``Authorization: Bearer TOKEN`` or ``X-Kaflite-Token: TOKEN``; it is compared in
constant time.
"""

from __future__ import annotations

import hmac
import secrets

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SAFE_METHODS", "TokenGuard", "new_token", "token_of"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def new_token() -> str:
    return secrets.token_urlsafe(24)


def token_of(request: Request) -> str | None:
    """The token a request carries, if any."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-kaflite-token") or None


class TokenGuard:
    """ASGI middleware: refuse (401) an unsafe method without the right token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            given = token_of(Request(scope))
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                message = ("this request changes state and needs the console token "
                           "(Authorization: Bearer TOKEN or X-Kaflite-Token: TOKEN; "
                           "kaflite up prints it)" if given is None
                           else "wrong console token")
                await JSONResponse({"error": message}, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)
