"""SaslHandshake (key 17) and SaslAuthenticate (key 36): SASL on the wire.

SaslHandshake picks a mechanism: an enabled one starts an exchange, anything
else gets UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection
is closed after the answer, as Kafka closes it. SaslAuthenticate carries the
exchange's messages to the connection's ``SaslSession`` (kaflite.cluster.auth);
a failure gets SASL_AUTHENTICATION_FAILED with its message (which never holds
a secret), then the connection closes. v1+ answers carry session_lifetime_ms
(KIP-368). On a listener without SASL both answer ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kaflite.security.errors import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanism,
)

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

ILLEGAL_SASL_STATE = errors.IllegalSaslStateError.code
UNSUPPORTED_SASL_MECHANISM = errors.UnsupportedSaslMechanismError.code
SASL_AUTHENTICATION_FAILED = errors.SaslAuthenticationFailedError.code


async def handle_sasl_handshake(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = conn.sasl
    if session is None:
        return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    try:
        started = session.handshake(req.mechanism, header.request_api_version)
    except UnsupportedSaslMechanism:   # enabled in config, but kaflite lacks it
        started = False
    except IllegalSaslState:
        conn.close_after_response = True
        return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=session.enabled)
    if not started:
        conn.close_after_response = True
        return SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM,
                                     mechanisms=session.enabled)
    return SaslHandshakeResponse(error_code=0, mechanisms=session.enabled)


async def handle_sasl_authenticate(broker: Broker, conn: ServerConnection,
                                   header: RequestHeader,
                                   req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = conn.sasl
    if session is None:
        return SaslAuthenticateResponse(
            error_code=ILLEGAL_SASL_STATE, auth_bytes=b"",
            error_message=f"Unexpected SaslAuthenticate on listener {conn.listener.name}, "
                          "which has no SASL")
    before = session.authentications
    try:
        reply, lifetime_ms = session.authenticate(bytes(req.auth_bytes))
    except SaslAuthenticationFailed as exc:
        conn.close_after_response = True
        broker.log_bad_input(conn.info.peer, f"SASL authentication failed: {exc}")
        return SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED,
                                        error_message=str(exc), auth_bytes=b"")
    except IllegalSaslState as exc:
        conn.close_after_response = True
        broker.log_bad_input(conn.info.peer, f"illegal SASL state: {exc}")
        return SaslAuthenticateResponse(error_code=ILLEGAL_SASL_STATE,
                                        error_message=str(exc), auth_bytes=b"")
    if session.authentications > before:
        conn.authenticated()
    return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=reply,
                                    session_lifetime_ms=lifetime_ms)


HANDLERS = [Handler(SaslHandshakeRequest, 0, 1, handle_sasl_handshake),
            Handler(SaslAuthenticateRequest, 0, 2, handle_sasl_authenticate)]
