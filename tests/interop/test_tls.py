"""kaflite's client over TLS against each target, with the same PEM files (made by
``kaflite.security.certs``): an SSL listener that requires a client certificate
(mTLS), and a SASL_SSL listener with SCRAM-SHA-256."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from kaflite.client import Admin, AuthenticationError, Consumer, Producer
from kaflite.security.certs import Pki, write_test_pki
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, run, uid
from tests.interop.conftest import make_target, started

pytestmark = pytest.mark.interop

MECHANISM = "SCRAM-SHA-256"


def tls_config(pki: Pki) -> dict[str, object]:
    # What `kaflite certs` prints for brokers (PEM files, the key unencrypted). An
    # encrypted key (`--key-password`) would not do for Kafka on Java 17: it cannot
    # decrypt kaflite's PBES2 (AES) keys ("PBES2 SecretKeyFactory not available").
    return {
        **pki.broker_properties(),
        # mTLS on the SSL listener only (on SASL_SSL the SASL user is the principal)
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("pki"), clients=["alice"])


@pytest.fixture(scope="module", params=["kaflite-1", "kafka-1"])
def tls_target(request: pytest.FixtureRequest, pki: Pki) -> Iterator[ClusterUnderTest]:
    target = make_target(request.param, request, config=tls_config(pki),
                         listeners=["SSL", "SASL_SSL"])
    yield from started(target)


def ssl_client(target: ClusterUnderTest, pki: Pki, certificate: bool = True
               ) -> dict[str, object]:
    opts: dict[str, object] = {"bootstrap_servers": target.bootstrap("SSL"),
                               "security_protocol": "SSL", "ssl_ca_location": str(pki.ca)}
    if certificate:
        cert, key = pki.clients["alice"]
        opts.update(ssl_certificate_location=str(cert), ssl_key_location=str(key))
    return opts


async def round_trip(opts: dict[str, object], servers: str, topic: str) -> list[bytes]:
    """Produce three records and read them back in a group, all with ``opts``."""
    await create_topic(servers, topic, 1, 1)
    async with Producer(**opts, acks="all") as p:
        for i in range(3):
            await p.send(topic, f"tls-{i}".encode(), partition=0)
    got: list[bytes] = []
    async with Consumer(**opts, group_id=uid("tls-group"), auto_offset_reset="earliest") as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 3:
            got += [r.value or b"" for r in await c.poll(200)]
            assert time.monotonic() < deadline, f"read {got}"
    return got


def test_mtls(tls_target: ClusterUnderTest, pki: Pki) -> None:
    opts = ssl_client(tls_target, pki)
    got = run(round_trip(opts, tls_target.bootstrap_servers, uid("mtls")))
    assert got == [b"tls-0", b"tls-1", b"tls-2"]

    async def without_certificate() -> None:
        async with Admin(**ssl_client(tls_target, pki, certificate=False)) as admin:
            await admin.list_topics()

    # Kafka answers with a TLS alert (the client raises SslAuthenticationError); kaflite's
    # broker closes the connection in the handshake (NoBrokerAvailable, "closed by the
    # broker during the handshake"). Either way the client gets no further.
    with pytest.raises((AuthenticationError, ConnectionError, OSError)):
        run(without_certificate(), timeout=60)


def test_sasl_ssl_with_scram(tls_target: ClusterUnderTest, pki: Pki) -> None:
    async def main() -> list[bytes]:
        async with Admin(bootstrap_servers=tls_target.bootstrap_servers) as admin:
            await admin.alter_user_scram_credentials([("bob", MECHANISM, "bob-secret", 4096)])
            deadline = time.monotonic() + 20
            while not (await admin.describe_user_scram_credentials(["bob"])).get("bob"):
                assert time.monotonic() < deadline, "bob's credential never appeared"
                await asyncio.sleep(0.1)
        opts: dict[str, object] = {
            "bootstrap_servers": tls_target.bootstrap("SASL_SSL"),
            "security_protocol": "SASL_SSL", "ssl_ca_location": str(pki.ca),
            "sasl_mechanism": MECHANISM, "sasl_username": "bob", "sasl_password": "bob-secret"}
        return await round_trip(opts, tls_target.bootstrap_servers, uid("sasl-ssl"))

    assert run(main()) == [b"tls-0", b"tls-1", b"tls-2"]
