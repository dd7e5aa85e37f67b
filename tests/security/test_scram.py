"""SCRAM-SHA-256/512: RFC 7677's test vector, round trips, and every way an exchange fails."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.security.errors import IllegalSaslState, SaslAuthenticationFailed, SaslError
from kaflite.security.scram import (
    ScramClient,
    ScramCredential,
    ScramServer,
    StaticCredentialStore,
    salted_credential,
    salted_password,
    scram_credential,
)

# RFC 7677, section 3
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

MECH = "SCRAM-SHA-256"


def rfc_store() -> StaticCredentialStore:
    store = StaticCredentialStore()
    store.scram_credentials[("user", MECH)] = scram_credential(MECH, "pencil", 4096, SALT)
    return store


STORE = rfc_store()


def test_rfc7677_client() -> None:
    client = ScramClient(MECH, "user", "pencil", nonce=CLIENT_NONCE)
    assert client.start() == CLIENT_FIRST
    assert client.respond(SERVER_FIRST) == CLIENT_FINAL
    assert not client.complete
    assert client.respond(SERVER_FINAL) is None
    assert client.complete


def test_rfc7677_server() -> None:
    server = ScramServer(MECH, STORE, nonce=SERVER_NONCE)
    assert server.respond(CLIENT_FIRST) == SERVER_FIRST
    assert server.principal is None
    assert server.respond(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.principal == "User:user"
    assert server.expires_at_ms is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user", ["alice", "a,b=c", "ünï"])
def test_round_trip(mechanism: str, user: str) -> None:
    store = StaticCredentialStore()
    store.add_user(user, "s3cret", (mechanism,), iterations=8192)
    client, server = ScramClient(mechanism, user, "s3cret"), ScramServer(mechanism, store)
    final = client.respond(server.respond(client.start()))
    assert final is not None
    assert client.respond(server.respond(final)) is None
    assert client.complete and server.complete
    assert server.principal == f"User:{user}"


def exchange(user: str, password: str, mechanism: str = MECH,
             store: StaticCredentialStore = STORE) -> tuple[ScramClient, ScramServer, bytes]:
    client, server = ScramClient(mechanism, user, password), ScramServer(mechanism, store)
    final = client.respond(server.respond(client.start()))
    assert final is not None
    return client, server, final


def test_wrong_password() -> None:
    _, server, final = exchange("user", "wrong")
    with pytest.raises(SaslAuthenticationFailed, match="invalid credentials with SASL mechanism "
                       "SCRAM-SHA-256") as info:
        server.respond(final)
    assert "wrong" not in str(info.value)
    assert not server.complete and server.principal is None


def test_unknown_user_looks_like_a_known_one() -> None:
    """A server-first for an unknown user, with a salt that is stable per user, then the
    same failure as a wrong password: nothing tells the two apart."""
    replies = [ScramServer(MECH, STORE).respond(b"n,,n=mallory,r=abc") for _ in range(2)]
    salts = {r.split(b",")[1] for r in replies}
    assert len(salts) == 1
    assert replies[0].endswith(b",i=4096")
    _, server, final = exchange("mallory", "pencil")
    with pytest.raises(SaslAuthenticationFailed) as unknown:
        server.respond(final)
    _, server, final = exchange("user", "nope")
    with pytest.raises(SaslAuthenticationFailed) as wrong:
        server.respond(final)
    assert str(unknown.value) == str(wrong.value)


def test_mechanism_mismatch_is_unknown_user() -> None:
    _, server, final = exchange("user", "pencil", "SCRAM-SHA-512")
    with pytest.raises(SaslAuthenticationFailed):
        server.respond(final)


def test_wrong_nonce() -> None:
    _, server, final = exchange("user", "pencil")
    text = final.decode()
    head, proof = text.rsplit(",p=", 1)
    bad = head[:-1] + ("x" if head[-1] != "x" else "y") + ",p=" + proof
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        server.respond(bad.encode())


def test_replayed_client_final() -> None:
    """The same client-final twice on one connection is out of order; replayed on a new
    exchange it carries an old nonce."""
    _, server, final = exchange("user", "pencil")
    server.respond(final)
    with pytest.raises(IllegalSaslState):
        server.respond(final)
    fresh = ScramServer(MECH, STORE)
    fresh.respond(b"n,,n=user,r=" + final.split(b",r=")[1][:20])
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        fresh.respond(final)


def test_channel_binding_mismatch() -> None:
    _, server, final = exchange("user", "pencil")
    with pytest.raises(SaslAuthenticationFailed, match="channel binding"):
        server.respond(final.replace(b"c=biws", b"c=eSws"))


@pytest.mark.parametrize("message", [
    b"", b"garbage", b"p=tls-unique,,n=user,r=abc", b"n,,r=abc,n=user", b"n,,n=,r=abc",
    b"n,,n=us=er,r=abc", b"n,,n=user,r=a b", b"n,,n=user,r=abc,m=x", b"\xff\xfe",
    b"n,,n=user,r=abc\x00",
])
def test_malformed_client_first(message: bytes) -> None:
    with pytest.raises(IllegalSaslState):
        ScramServer(MECH, STORE).respond(message)


def test_authzid_must_be_the_user() -> None:
    server = ScramServer(MECH, STORE)
    assert server.respond(b"n,a=user,n=user,r=abc").startswith(b"r=abc")
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        ScramServer(MECH, STORE).respond(b"n,a=admin,n=user,r=abc")


def test_kafka_extensions_are_accepted() -> None:
    client = ScramClient(MECH, "user", "pencil", extensions={"tokenauth": "false"})
    server = ScramServer(MECH, STORE)
    first = client.start()
    assert first.endswith(b",tokenauth=false")
    final = client.respond(server.respond(first))
    assert final is not None
    assert client.respond(server.respond(final)) is None and server.complete


def test_client_rejects_a_bad_server() -> None:
    client = ScramClient(MECH, "user", "pencil", nonce=CLIENT_NONCE)
    client.start()
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        client.respond(b"r=otherNONCE,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    client = ScramClient(MECH, "user", "pencil", nonce=CLIENT_NONCE)
    client.start()
    with pytest.raises(SaslAuthenticationFailed, match="minimum 4096"):
        client.respond(SERVER_FIRST.replace(b"i=4096", b"i=1000"))
    client = ScramClient(MECH, "user", "pencil", nonce=CLIENT_NONCE)
    client.start()
    client.respond(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailed, match="server signature"):
        client.respond(b"v=" + base64.b64encode(b"\x00" * 32))
    assert not client.complete
    client = ScramClient(MECH, "user", "pencil", nonce=CLIENT_NONCE)
    client.start()
    client.respond(SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailed, match="invalid-proof"):
        client.respond(b"e=invalid-proof")


def test_credentials() -> None:
    cred = scram_credential(MECH, "pencil", 4096, SALT)
    assert cred == salted_credential(MECH, SALT, salted_password(MECH, "pencil", SALT, 4096),
                                     4096)
    assert ScramCredential.from_kafka(MECH, cred.to_kafka()) == cred
    assert cred.to_kafka().startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    with pytest.raises(ValueError, match="minimum 4096"):
        scram_credential(MECH, "pencil", 4095)
    with pytest.raises(ValueError, match="not a SCRAM mechanism"):
        scram_credential("SCRAM-MD5", "pencil")
    with pytest.raises(ValueError):
        ScramCredential.from_kafka(MECH, "salt=!!,iterations=4096")
    assert len(scram_credential("SCRAM-SHA-512", "x").stored_key) == 64


def mutate(message: bytes, data: st.DataObject) -> bytes:
    kind = data.draw(st.sampled_from(["replace", "insert", "delete", "truncate"]))
    pos = data.draw(st.integers(0, len(message) - 1))
    if kind == "replace":
        return message[:pos] + bytes([data.draw(st.integers(0, 255))]) + message[pos + 1:]
    if kind == "insert":
        return message[:pos] + data.draw(st.binary(min_size=1, max_size=4)) + message[pos:]
    if kind == "delete":
        return message[:pos] + message[pos + 1:]
    return message[:pos]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_client_messages_fail_cleanly(data: st.DataObject) -> None:
    first = mutate(CLIENT_FIRST, data) if data.draw(st.booleans()) else CLIENT_FIRST
    server = ScramServer(MECH, STORE, nonce=SERVER_NONCE)
    try:
        server.respond(first)
        final = mutate(CLIENT_FINAL, data)
        reply = server.respond(final)
    except SaslError:
        assert not server.complete and server.principal is None
        return
    # accepted: only a spelling of the same proof (base64's unused bits) may pass
    assert reply == SERVER_FINAL and first == CLIENT_FIRST


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_server_messages_fail_cleanly(data: st.DataObject) -> None:
    client = ScramClient(MECH, "user", "pencil", nonce=CLIENT_NONCE)
    client.start()
    mutate_first = data.draw(st.booleans())
    try:
        client.respond(mutate(SERVER_FIRST, data) if mutate_first else SERVER_FIRST)
        if mutate_first:
            return
        client.respond(mutate(SERVER_FINAL, data))
    except SaslError:
        assert not client.complete


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=200))
def test_random_bytes_fail_cleanly(first: bytes, final: bytes) -> None:
    server = ScramServer("SCRAM-SHA-512", STORE)
    with pytest.raises(SaslError):
        server.respond(first)
        server.respond(final)


def test_client_refuses_huge_iteration_counts() -> None:
    client = ScramClient(MECH, "user", "pencil", nonce=CLIENT_NONCE)
    client.start()
    with pytest.raises(SaslAuthenticationFailed, match="more than"):
        client.respond(SERVER_FIRST.replace(b"i=4096", b"i=999999999"))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_client_against_our_server(mechanism: str) -> None:
    """A third-party SCRAM client (kafka-python's) authenticates with our server."""
    scram = pytest.importorskip("kafka.net.sasl.scram")
    store = StaticCredentialStore()
    store.add_user("alice", "alice-secret", (mechanism,))
    theirs, server = scram.ScramClient("alice", "alice-secret", mechanism), \
        ScramServer(mechanism, store)
    theirs.process_server_first_message(server.respond(theirs.first_message()))
    theirs.process_server_final_message(server.respond(theirs.final_message()))
    assert server.principal == "User:alice"
    wrong = scram.ScramClient("alice", "nope", mechanism)
    server = ScramServer(mechanism, store)
    wrong.process_server_first_message(server.respond(wrong.first_message()))
    with pytest.raises(SaslAuthenticationFailed):
        server.respond(wrong.final_message())
