"""Ending SASL at the proxy, and the proxy's own SASL login to the upstream.

Client side (``ProxySasl``): the proxy authenticates clients itself, with the
users it was given (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, derived in memory
at start). Each client connection holds a broker's ``SaslSession``
(``kaflite.cluster.auth``) over a ``StaticCredentialStore``, so the mechanisms
and their checks are the broker's own. SaslHandshake and SaslAuthenticate are
answered by the proxy, never forwarded; before authentication completes only
ApiVersions, SaslHandshake and SaslAuthenticate are served, and anything else
closes the connection, as a broker does. A failed authentication gets
SASL_AUTHENTICATION_FAILED with the reason, then the connection closes. The
registry row takes the authenticated principal and mechanism.

Upstream side (``UpstreamSasl``): each upstream connection the proxy opens logs
in with the proxy's own credentials (SaslHandshake v1, then SaslAuthenticate v1
until the mechanism completes) before any client request is forwarded on it.
The upstream thus sees the proxy's identity; mapping each client principal to
an upstream identity is not done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from kaflite.cluster.auth import SaslSession
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    Struct,
)
from kaflite.security.errors import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslError,
    UnsupportedSaslMechanism,
)
from kaflite.security.sasl import SaslClient, client_mechanism
from kaflite.security.scram import StaticCredentialStore

__all__ = ["PROXY_SASL_MECHANISMS", "SASL_AUTHENTICATE", "SASL_HANDSHAKE", "ProxySasl",
           "UpstreamSasl", "answer_sasl", "login", "parse_users"]

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
PROXY_SASL_MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ILLEGAL_SASL_STATE = errors.IllegalSaslStateError.code
UNSUPPORTED_SASL_MECHANISM = errors.UnsupportedSaslMechanismError.code
SASL_AUTHENTICATION_FAILED = errors.SaslAuthenticationFailedError.code
LISTENER = "PROXY"


def parse_users(text: str) -> dict[str, str]:
    """``alice:secret,bob:secret`` (the broker's ``sasl.users`` form)."""
    users: dict[str, str] = {}
    for item in text.split(","):
        name, sep, password = item.strip().partition(":")
        if item.strip() and (not sep or not name):
            raise ValueError("users are given as user:password,...")
        if name:
            users[name] = password
    return users


class ProxySasl:
    """The users the proxy authenticates clients against, and its mechanisms."""

    def __init__(self, users: Mapping[str, str],
                 mechanisms: Sequence[str] = PROXY_SASL_MECHANISMS) -> None:
        wanted = [m.upper() for m in mechanisms]
        unknown = [m for m in wanted if m not in PROXY_SASL_MECHANISMS]
        if unknown or not wanted:
            raise ValueError(f"the proxy authenticates with {', '.join(PROXY_SASL_MECHANISMS)}"
                             f", not {', '.join(unknown) or 'nothing'}")
        if not users:
            raise ValueError("ending SASL at the proxy needs at least one user")
        self.mechanisms = wanted
        self.store = StaticCredentialStore()
        scrams = tuple(m for m in wanted if m != "PLAIN")
        for user, password in users.items():
            self.store.add_user(user, password, ("PLAIN", *scrams))
        self.props = {"sasl.enabled.mechanisms": ",".join(wanted)}

    def session(self) -> SaslSession:
        return SaslSession(self.store, self.props, LISTENER)


def answer_sasl(session: SaslSession, api_key: int, version: int,
                request: Struct) -> tuple[Struct, bool]:
    """The proxy's answer to a client's SaslHandshake or SaslAuthenticate, and
    whether the connection closes after it (as the broker's handlers decide)."""
    if isinstance(request, SaslHandshakeRequest):
        if version == 0:   # bare tokens would follow, which the proxy does not read
            return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE,
                                         mechanisms=session.enabled), True
        try:
            started = session.handshake(request.mechanism, version)
        except UnsupportedSaslMechanism:
            started = False
        except IllegalSaslState:
            return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE,
                                         mechanisms=session.enabled), True
        code = 0 if started else UNSUPPORTED_SASL_MECHANISM
        return SaslHandshakeResponse(error_code=code, mechanisms=session.enabled), not started
    assert isinstance(request, SaslAuthenticateRequest)
    try:
        reply, lifetime_ms = session.authenticate(bytes(request.auth_bytes))
    except SaslAuthenticationFailed as exc:
        return SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED,
                                        error_message=str(exc), auth_bytes=b""), True
    except IllegalSaslState as exc:
        return SaslAuthenticateResponse(error_code=ILLEGAL_SASL_STATE,
                                        error_message=str(exc), auth_bytes=b""), True
    return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=reply,
                                    session_lifetime_ms=lifetime_ms), False


@dataclass(frozen=True)
class UpstreamSasl:
    """The proxy's own credentials for the upstream (PLAIN or SCRAM)."""

    mechanism: str
    username: str
    password: str

    def __post_init__(self) -> None:
        if self.mechanism not in PROXY_SASL_MECHANISMS:
            raise ValueError(f"the proxy logs in upstream with "
                             f"{', '.join(PROXY_SASL_MECHANISMS)}, not {self.mechanism}")

    def client(self) -> SaslClient:
        """A mechanism for one exchange (SCRAM nonces never repeat)."""
        return client_mechanism(self.mechanism, {"sasl.username": self.username,
                                                 "sasl.password": self.password})

    def __repr__(self) -> str:   # never a password in a log line
        return f"UpstreamSasl({self.mechanism}, {self.username})"


async def login(creds: UpstreamSasl,
                call: Callable[[int, Struct], Awaitable[Struct]]) -> None:
    """The proxy's SASL exchange on one upstream connection: ``call(api_key, request)``
    sends a v1 request and returns its decoded answer. Raises ``SaslError``."""
    client = creds.client()
    shake = await call(SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=client.mechanism))
    assert isinstance(shake, SaslHandshakeResponse)
    if shake.error_code:
        raise SaslError(f"the upstream refused {client.mechanism} "
                        f"(error {shake.error_code}; it offers {shake.mechanisms})")
    token: bytes | None = client.start()
    while token is not None:
        reply = await call(SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token))
        assert isinstance(reply, SaslAuthenticateResponse)
        if reply.error_code:
            raise SaslError(reply.error_message or f"error {reply.error_code}")
        token = client.respond(bytes(reply.auth_bytes))
    if not client.complete:
        raise SaslError("the upstream's SASL exchange did not complete")
