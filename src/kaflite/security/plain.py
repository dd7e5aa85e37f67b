"""SASL/PLAIN (RFC 4616): ``[authzid] NUL user NUL password``, checked against the users
that the broker's config names (Kafka's PLAIN checks only its configured users)."""

from __future__ import annotations

import hmac

from kaflite.security.errors import IllegalSaslState, SaslAuthenticationFailed
from kaflite.security.scram import CredentialStore, PasswordServer

__all__ = ["PlainClient", "PlainServer"]


class PlainClient:
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        self._message = f"{authzid}\0{username}\0{password}".encode()
        self._state = "init"

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def start(self) -> bytes:
        if self._state != "init":
            raise IllegalSaslState("PLAIN client already started")
        self._state = "sent"
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        if self._state != "sent":
            raise IllegalSaslState(f"PLAIN client got a message in state {self._state}")
        if challenge:
            raise IllegalSaslState("PLAIN server sent a non-empty reply")
        self._state = "complete"
        return None


class PlainServer(PasswordServer):
    mechanism = "PLAIN"

    def __init__(self, store: CredentialStore) -> None:
        self._store = store
        self._user: str | None = None
        self._state = "init"

    def respond(self, message: bytes) -> bytes:
        if self._state != "init":
            raise IllegalSaslState(f"Unexpected PLAIN message in state {self._state}")
        self._state = "failed"
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise IllegalSaslState("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise IllegalSaslState(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, user, password = tokens
        if not user:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username")
        expected = self._store.plain(user)
        # compare even for an unknown user, so its answer takes as long as a wrong password's
        ok = hmac.compare_digest(password.encode(), (expected or "\0" + password).encode())
        if expected is None or not ok:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        self._user = user
        self._state = "complete"
        return b""
