"""SASL/PLAIN: only the configured users get in; the messages are RFC 4616's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.security.errors import IllegalSaslState, SaslAuthenticationFailed, SaslError
from kaflite.security.plain import PlainClient, PlainServer
from kaflite.security.scram import StaticCredentialStore

STORE = StaticCredentialStore(plain_passwords={"alice": "alice-secret"})


def test_round_trip() -> None:
    client, server = PlainClient("alice", "alice-secret"), PlainServer(STORE)
    first = client.start()
    assert first == b"\0alice\0alice-secret"
    assert client.respond(server.respond(first)) is None
    assert client.complete and server.complete and server.principal == "User:alice"


@pytest.mark.parametrize(("message", "error", "text"), [
    (b"\0alice\0wrong", SaslAuthenticationFailed, "Invalid username or password"),
    (b"\0bob\0alice-secret", SaslAuthenticationFailed, "Invalid username or password"),
    (b"\0\0x", SaslAuthenticationFailed, "username not specified"),
    (b"\0alice\0", SaslAuthenticationFailed, "password not specified"),
    (b"admin\0alice\0alice-secret", SaslAuthenticationFailed, "authorization id"),
    (b"alice\0alice-secret", IllegalSaslState, "expected 3 tokens, got 2"),
    (b"\xff\0alice\0x", IllegalSaslState, "UTF-8"),
])
def test_refused(message: bytes, error: type[Exception], text: str) -> None:
    server = PlainServer(STORE)
    with pytest.raises(error, match=text) as info:
        server.respond(message)
    assert "alice-secret" not in str(info.value) and "wrong" not in str(info.value)
    assert not server.complete and server.principal is None
    with pytest.raises(IllegalSaslState):
        server.respond(b"\0alice\0alice-secret")


def test_authzid_equal_to_user_is_accepted() -> None:
    server = PlainServer(STORE)
    assert server.respond(b"alice\0alice\0alice-secret") == b""
    assert server.principal == "User:alice"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_fail_cleanly(message: bytes) -> None:
    server = PlainServer(STORE)
    try:
        server.respond(message)
    except SaslError:
        assert not server.complete
        return
    assert message.split(b"\0")[1:] == [b"alice", b"alice-secret"]
