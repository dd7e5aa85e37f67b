"""kaflite's client against a scripted secured broker: TLS, SASL, re-auth, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kaflite.client import Admin
from kaflite.net.connection import AuthenticationError, SslAuthenticationError
from kaflite.protocol.connection import SaslAuthenticationError, SaslMechanismError
from kaflite.protocol.errors import SaslAuthenticationFailedError
from kaflite.protocol.messages import MetadataRequest
from kaflite.security.certs import Pki, write_test_pki
from kaflite.security.scram import StaticCredentialStore
from kaflite.security.tls import server_context
from tests.client.security._fake_broker import FakeBroker


def run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("pki"), clients=("client",))


def _store() -> StaticCredentialStore:
    store = StaticCredentialStore()
    store.add_user("alice", "alice-secret")
    return store


def _sasl(mechanism: str, password: str = "alice-secret", protocol: str = "SASL_PLAINTEXT",
          **extra: Any) -> dict[str, Any]:
    return {"security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.username": "alice", "sasl.password": password, **extra}


async def _with_admin(broker: FakeBroker, config: dict[str, Any],
                      body: Callable[[Admin], Awaitable[None]]) -> None:
    async with broker:
        admin = Admin({"bootstrap.servers": broker.bootstrap, **config})
        try:
            await body(admin)
        finally:
            await admin.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_each_mechanism_authenticates_before_the_first_request(mechanism: str) -> None:
    broker = FakeBroker(_store())

    async def body(admin: Admin) -> None:
        await admin.start()
        [info] = admin.connections()
        assert info.security_protocol == "SASL_PLAINTEXT" and info.tls is None
        assert (info.mechanism, info.principal) == (mechanism, "User:alice")
        assert info.last_authenticated is not None and info.reauthentications == 0
        [auth] = admin.events("auth")
        assert mechanism in auth.message and "alice-secret" not in str(auth)

    run(_with_admin(broker, _sasl(mechanism), body))
    assert broker.sessions[0].principal == "User:alice"
    assert broker.sessions[0].mechanism == mechanism
    # the handshake came first, then the client's first request
    assert broker.requests[:2] == ["ApiVersions", "SaslHandshake"]
    assert broker.requests[broker.requests.index("Metadata") - 1] == "SaslAuthenticate"


def test_sasl_ssl(pki: Pki) -> None:
    broker = FakeBroker(_store(), ssl_context=server_context(
        str(pki.broker_cert), str(pki.broker_key)))

    async def body(admin: Admin) -> None:
        await admin.start()
        [info] = admin.connections()
        assert info.security_protocol == "SASL_SSL" and (info.tls or "").startswith("TLSv1.")
        assert info.mechanism == "SCRAM-SHA-512"
        kinds = [e.kind for e in admin.events() if e.kind in ("tls", "auth")]
        assert kinds == ["tls", "auth"]

    run(_with_admin(broker, _sasl("SCRAM-SHA-512", protocol="SASL_SSL",
                                  **{"ssl.ca.location": str(pki.ca)}), body))
    assert broker.sessions[0].principal == "User:alice"


def test_mtls_principal_is_the_certificate_subject(pki: Pki) -> None:
    broker = FakeBroker(_store(), sasl=False, ssl_context=server_context(
        str(pki.broker_cert), str(pki.broker_key), cafile=str(pki.ca), client_auth="required"))

    async def body(admin: Admin) -> None:
        await admin.start()
        [info] = admin.connections()
        assert info.security_protocol == "SSL" and info.mechanism is None
        assert info.principal == "User:CN=client"

    run(_with_admin(broker, pki.client_properties("client"), body))


def test_mtls_without_a_client_certificate_is_fatal(pki: Pki) -> None:
    broker = FakeBroker(_store(), sasl=False, ssl_context=server_context(
        str(pki.broker_cert), str(pki.broker_key), cafile=str(pki.ca), client_auth="required"))

    async def body(admin: Admin) -> None:
        # TLS 1.3: the broker refuses after the client's side of the handshake is done;
        # what the client sees is the alert (fatal) or, from an asyncio broker, a close
        with pytest.raises((AuthenticationError, ConnectionError),
                           match="certificate"):
            await admin.start()

    run(_with_admin(broker, {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}, body))


def test_untrusted_broker_certificate_is_fatal(pki: Pki, tmp_path: Path) -> None:
    other = write_test_pki(tmp_path / "other")      # another CA
    broker = FakeBroker(_store(), ssl_context=server_context(
        str(other.broker_cert), str(other.broker_key)))

    async def body(admin: Admin) -> None:
        with pytest.raises(SslAuthenticationError, match=r"certificate verify failed|"
                                                         r"unable to get local issuer"):
            await admin.start()
        assert admin.events("auth") and "failed" in admin.events("auth")[0].message

    run(_with_admin(broker, _sasl("PLAIN", protocol="SASL_SSL",
                                  **{"ssl.ca.location": str(pki.ca)}), body))
    assert broker.sessions == [] or broker.sessions[0].principal is None


@pytest.mark.parametrize(("algorithm", "ok"), [("https", False), ("none", True)])
def test_endpoint_identification_checks_the_ip(tmp_path: Path, algorithm: str, ok: bool) -> None:
    named = write_test_pki(tmp_path, hosts=("localhost",))   # no 127.0.0.1 SAN
    broker = FakeBroker(_store(), ssl_context=server_context(
        str(named.broker_cert), str(named.broker_key)))

    async def body(admin: Admin) -> None:
        if ok:
            await admin.start()
            assert admin.connections()[0].tls
        else:
            with pytest.raises(SslAuthenticationError, match="IP address mismatch"):
                await admin.start()

    run(_with_admin(broker, _sasl("PLAIN", protocol="SASL_SSL", **{
        "ssl.ca.location": str(named.ca),
        "ssl.endpoint.identification.algorithm": algorithm}), body))


def test_wrong_password_is_fatal_with_the_brokers_message() -> None:
    broker = FakeBroker(_store())

    async def body(admin: Admin) -> None:
        with pytest.raises(SaslAuthenticationError) as info:
            await admin.start()
        err = info.value
        assert isinstance(err, SaslAuthenticationFailedError) and err.code == 58
        assert err.message and "wrong-pw" not in str(err)
        opened = len(broker.sessions)
        # not retried: the next call gets the same error without a new connection
        with pytest.raises(SaslAuthenticationError):
            await admin.start()
        assert len(broker.sessions) == opened
        [event] = admin.events("auth")
        assert event.cause == err.message

    run(_with_admin(broker, _sasl("SCRAM-SHA-256", password="wrong-pw"), body))


def test_mechanism_not_enabled_names_the_enabled_ones() -> None:
    broker = FakeBroker(_store(), mechanisms=("SCRAM-SHA-512",))

    async def body(admin: Admin) -> None:
        with pytest.raises(SaslMechanismError, match="enabled: SCRAM-SHA-512"):
            await admin.start()

    run(_with_admin(broker, _sasl("PLAIN"), body))


def test_reauthentication_keeps_requests_flowing() -> None:
    broker = FakeBroker(_store(), session_lifetime_ms=400)

    async def body(admin: Admin) -> None:
        await admin.start()
        conn = admin.pool.connection_if_open(0)
        assert conn is not None
        answered = 0
        for _ in range(40):          # ~2 s: about five sessions of 400 ms
            got = await asyncio.gather(*(conn.request(MetadataRequest(topics=[]))
                                         for _ in range(4)))
            answered += len(got)
            await asyncio.sleep(0.05)
        assert answered == 160
        assert admin.pool.connection_if_open(0) is conn and conn.connected
        [info] = admin.connections()
        assert info.reauthentications >= 3
        assert len(admin.events("reauth")) == info.reauthentications

    run(_with_admin(broker, _sasl("SCRAM-SHA-512"), body))
    assert broker.closed_expired == 0
    assert broker.sessions[0].authentications >= 4


def test_an_expired_session_without_reauthentication_is_closed_by_the_broker() -> None:
    """The fake broker's rule that the test above relies on: it does bite."""
    broker = FakeBroker(_store(), session_lifetime_ms=200)

    async def body(admin: Admin) -> None:
        await admin.start()
        conn = admin.pool.connection_if_open(0)
        assert conn is not None
        conn.state.reauth_at = None      # as a client without KIP-368
        await asyncio.sleep(0.3)
        with pytest.raises(ConnectionError):
            await conn.request(MetadataRequest(topics=[]))

    run(_with_admin(broker, _sasl("PLAIN"), body))
    assert broker.closed_expired == 1
