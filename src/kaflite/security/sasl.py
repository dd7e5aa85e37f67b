"""The SASL mechanisms behind one interface, for the broker and the client alike.

A client runs ``start()`` and sends its bytes in SaslAuthenticate, then hands every
reply to ``respond`` until it returns None (``complete`` is then True: the server's
last message was verified). A server hands every SaslAuthenticate's bytes to
``respond`` and sends back what it returns; once ``complete``, ``principal`` is the
authenticated ``User:<name>``. Failures raise ``kaflite.security.errors``' errors and
nothing else.

``client_mechanism`` builds a client from librdkafka's property names, and
``server_mechanism`` a server from a ``CredentialStore`` and the broker's configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kaflite.security.errors import UnsupportedSaslMechanism
from kaflite.security.oauthbearer import oauthbearer_client, oauthbearer_server
from kaflite.security.plain import PlainClient, PlainServer
from kaflite.security.scram import HASHES, CredentialStore, ScramClient, ScramServer

__all__ = ["MECHANISMS", "SaslClient", "SaslServer", "client_mechanism", "server_mechanism"]

MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslClient(Protocol):
    mechanism: str

    def start(self) -> bytes:
        """The first auth_bytes to send in SaslAuthenticate."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next auth_bytes for the server's ``challenge``; None when done."""
        ...

    @property
    def complete(self) -> bool:
        """True once the server's final message was verified."""
        ...


class SaslServer(Protocol):
    mechanism: str

    def respond(self, message: bytes) -> bytes:
        """The reply's auth_bytes; raises SaslAuthenticationFailed on bad credentials."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> str | None:
        """``User:alice`` once complete."""
        ...

    @property
    def expires_at_ms(self) -> int | None:
        """When the credential (an OAUTHBEARER token) expires: it caps the session."""
        ...


def _unsupported(mechanism: str) -> UnsupportedSaslMechanism:
    return UnsupportedSaslMechanism(
        f"Unsupported SASL mechanism {mechanism}; kaflite supports {', '.join(MECHANISMS)}")


def _text(props: Mapping[str, object], name: str) -> str:
    value = props.get(name)
    if value is None:
        raise ValueError(f"{name} must be set for SASL")
    return str(value)


def client_mechanism(mechanism: str, props: Mapping[str, object]) -> SaslClient:
    """A client for ``mechanism``, configured with librdkafka's names: ``sasl.username``
    and ``sasl.password``; for OAUTHBEARER see ``kaflite.security.oauthbearer`` (its
    ``start()`` may block to fetch a token)."""
    mechanism = mechanism.upper()
    if mechanism == "PLAIN":
        return PlainClient(_text(props, "sasl.username"), _text(props, "sasl.password"))
    if mechanism in HASHES:     # sasl.scram.tokenauth: a delegation token's login (KIP-48)
        tokenauth = str(props.get("sasl.scram.tokenauth", "false")).lower() == "true"
        return ScramClient(mechanism, _text(props, "sasl.username"),
                           _text(props, "sasl.password"),
                           extensions={"tokenauth": "true"} if tokenauth else None)
    if mechanism == "OAUTHBEARER":
        return oauthbearer_client(props)
    raise _unsupported(mechanism)


def server_mechanism(mechanism: str, store: CredentialStore,
                     props: Mapping[str, str]) -> SaslServer:
    """A server for ``mechanism``: PLAIN and SCRAM check ``store``, OAUTHBEARER validates
    tokens as ``props`` (the broker's configs) say."""
    if mechanism == "PLAIN":
        return PlainServer(store)
    if mechanism in HASHES:
        return ScramServer(mechanism, store)
    if mechanism == "OAUTHBEARER":
        return oauthbearer_server(props)
    raise _unsupported(mechanism)
