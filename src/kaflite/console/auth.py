"""The console token: state-changing requests need it, reads do not.

The token is random per start (``secrets.token_urlsafe``), printed at start-up
and written to the state file for the CLI. A request carries it as
``Authorization: Bearer TOKEN`` or ``X-Kaflite-Token: TOKEN``; it is compared in
constant time. On a kaflite cluster with SASL users the cluster's credentials do too,
as ``Authorization: Basic`` (``console/credentials.py`` checks them).

A console bound to loopback also refuses (421) a request whose ``Host`` is not a
loopback name, so that a web page elsewhere cannot read it through DNS rebinding.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SAFE_METHODS", "CredentialCheck", "TokenGuard", "host_name", "is_loopback", "new_token", "token_of"]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_NAMES or host.startswith("127.")


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def new_token() -> str:
    return secrets.token_urlsafe(24)


def token_of(request: Request) -> str | None:
    """The token a request carries, if any."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-kaflite-token") or None


CredentialCheck: TypeAlias = Callable[[str, str], Awaitable[bool]]


class TokenGuard:
    """ASGI middleware: refuse (401) an unsafe method without the right token, or (with
    ``credentials``, a cluster with SASL users) the cluster's credentials as HTTP Basic."""

    def __init__(self, app: ASGIApp, token: str, loopback_only: bool = True,
                 credentials: CredentialCheck | None = None) -> None:
        self.app, self.token, self.loopback_only = app, token, loopback_only
        self.credentials = credentials

    async def _basic_ok(self, request: Request) -> bool | None:
        """True/False for HTTP Basic credentials checked against the cluster; None when
        the request carries none (or the cluster has no SASL users)."""
        from kaflite.console.credentials import basic_credentials

        if self.credentials is None:
            return None
        given = basic_credentials(request.headers.get("authorization", ""))
        return None if given is None else await self.credentials(*given)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.loopback_only:
            host = host_name(Request(scope).headers.get("host", ""))
            if not is_loopback(host):
                await JSONResponse({"error": f"this console answers on loopback only, not "
                                             f"for Host {host!r}"}, 421)(scope, receive, send)
                return
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            request = Request(scope)
            basic = await self._basic_ok(request)
            given = token_of(request)
            if basic is False:
                message = ("wrong user or password (HTTP Basic: a SASL user of the "
                           "cluster; with an authorizer, one of its super.users)")
            elif basic is None and (given is None or not hmac.compare_digest(
                    given.encode(), self.token.encode())):
                message = ("this request changes state and needs the console token "
                           "(Authorization: Bearer TOKEN or X-Kaflite-Token: TOKEN; "
                           "kaflite up prints it)"
                           + (" or the cluster's credentials (HTTP Basic)"
                              if self.credentials is not None else "")
                           if given is None else "wrong console token")
            else:
                message = ""
            if message:
                await JSONResponse({"error": message}, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)
