"""kaflite's own client against a secured 3-broker kaflite cluster: every mechanism
over TLS, mTLS, the sync façade, KIP-368 re-authentication and a wrong password."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest

from kaflite.client import AuthenticationError, Consumer, NewTopic, Producer, TopicPartition
from kaflite.client import sync as ksync
from kaflite.cluster import Cluster
from kaflite.protocol.connection import SaslAuthenticationError
from kaflite.security.certs import Pki, write_test_pki

LISTENERS = ("PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,"
             "REAUTH://127.0.0.1:0")
REAUTH_MS = 1200
_names = itertools.count()


def run(coro: Awaitable[None], timeout: float = 60) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(coro, timeout)

    asyncio.run(bounded())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("pki"), clients=("client",))


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    config = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,"
                                          "REAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.users": "alice:alice-secret",
        **pki.broker_properties(),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "group.initial.rebalance.delay.ms": "0",
    }
    with Cluster(brokers=3, listeners=LISTENERS, config=config) as c:
        yield c


def _sasl_ssl(cluster: Cluster, pki: Pki, mechanism: str, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism, "ssl.ca.location": str(pki.ca),
        **{k if k == "oauth_cb" else k.replace("_", "."): v for k, v in extra.items()}}
    if mechanism == "OAUTHBEARER":
        config.setdefault("sasl.oauthbearer.config", "principal=alice")
    else:
        config.setdefault("sasl.username", "alice")
        config.setdefault("sasl.password", "alice-secret")
    return config


async def _produce_and_consume(config: dict[str, Any], topic: str, n: int = 30) -> None:
    async with Producer(config, linger_ms=0) as producer:
        for i in range(n):
            await producer.send(topic, f"v{i}".encode(), key=f"k{i}".encode())
        for info in producer.connections():
            assert info.principal in ("User:alice", None) or info.principal.startswith("User:CN")
            assert info.security_protocol == config["security.protocol"]
    async with Consumer(config, group_id=f"g-{topic}", auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        got: list[bytes] = []
        for _ in range(100):
            for record in await consumer.poll(timeout_ms=200):
                got.append(record.value)
            if len(got) >= n:
                break
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))
        kinds = {e.kind for e in consumer.events()}
        assert "tls" in kinds
        assert ("auth" in kinds) == config["security.protocol"].startswith("SASL_")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                       "OAUTHBEARER"])
def test_each_mechanism_over_tls(cluster: Cluster, pki: Pki, mechanism: str) -> None:
    topic = f"sec-{mechanism.lower()}-{next(_names)}"
    cluster.create_topic(topic, 3, 3)
    config = _sasl_ssl(cluster, pki, mechanism, client_id=f"cli-{topic}")
    run(_produce_and_consume(config, topic))
    rows = [c for c in cluster.connections(client_id=f"cli-{topic}", include_closed=True)]
    assert rows and {(c.listener, c.sasl_mechanism, c.principal) for c in rows} == {
        ("SASL_SSL", mechanism, "User:alice")}
    assert {c.broker for c in rows} == {0, 1, 2}      # every broker authenticated it


def test_mtls(cluster: Cluster, pki: Pki) -> None:
    topic = f"sec-mtls-{next(_names)}"
    cluster.create_topic(topic, 3, 3)
    config = {"bootstrap.servers": cluster.bootstrap("SSL"), "client.id": f"cli-{topic}",
              **pki.client_properties("client")}
    run(_produce_and_consume(config, topic))
    rows = cluster.connections(client_id=f"cli-{topic}", include_closed=True)
    assert rows and {(c.listener, c.principal) for c in rows} == {("SSL", "User:CN=client")}


def test_sync_facade_and_admin_with_oauth_cb(cluster: Cluster, pki: Pki) -> None:
    topic = f"sec-sync-{next(_names)}"
    calls: list[str] = []

    def token(config: str) -> tuple[str, float]:
        from kaflite.security.oauthbearer import oauthbearer_client
        calls.append(config)
        # an unsecured development token, as a user's callback would fetch a real one
        inner = oauthbearer_client({"sasl.oauthbearer.config": "principal=alice"})
        raw = inner.start().split(b"auth=Bearer ")[1].split(b"\x01")[0].decode()
        return raw, time.time() + 3600

    admin_config = _sasl_ssl(cluster, pki, "OAUTHBEARER", oauth_cb=token)
    del admin_config["sasl.oauthbearer.config"]
    with ksync.Admin(admin_config) as admin:
        admin.create_topics([NewTopic(topic, 2, 3)])
        [info, *_] = admin.connections()
        assert info.mechanism == "OAUTHBEARER" and info.tls
    assert calls
    config = _sasl_ssl(cluster, pki, "SCRAM-SHA-512")
    with ksync.Producer(config) as producer:
        for i in range(10):
            producer.send(topic, f"s{i}".encode())
    with ksync.Consumer(config, group_id=f"g-{topic}", auto_offset_reset="earliest") as c:
        c.subscribe([topic])
        got: list[bytes] = []
        for _ in range(100):
            got += [r.value for r in c.poll(timeout_ms=200)]
            if len(got) >= 10:
                break
    assert sorted(got) == sorted(f"s{i}".encode() for i in range(10))


def test_reauthentication_across_several_sessions_loses_nothing(cluster: Cluster) -> None:
    topic = f"sec-reauth-{next(_names)}"
    cluster.create_topic(topic, 3, 3)
    config = {"bootstrap.servers": cluster.bootstrap("REAUTH"),
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
              "sasl.username": "alice", "sasl.password": "alice-secret"}

    async def main() -> None:
        async with Producer(config, linger_ms=0) as producer, \
                Consumer(config, group_id=f"g-{topic}", auto_offset_reset="earliest") as consumer:
            consumer.subscribe([topic])
            sent: list[bytes] = []
            got: list[bytes] = []
            deadline = time.monotonic() + 4 * REAUTH_MS / 1000
            i = 0
            while time.monotonic() < deadline and i < 10_000:   # bounded either way
                value = f"r{i}".encode()
                await producer.send(topic, value)
                sent.append(value)
                got += [r.value for r in await consumer.poll(timeout_ms=20)]
                i += 1
            for _ in range(200):
                if len(got) >= len(sent):
                    break
                got += [r.value for r in await consumer.poll(timeout_ms=100)]
            assert sorted(got) == sorted(sent)
            for client in (producer, consumer):
                busiest = max(c.reauthentications for c in client.connections())
                assert busiest >= 2, client.connections()
                assert client.events("reauth")
                assert not [e for e in client.events("disconnect")
                            if "reauth" in (e.cause or "")]

    run(main())
    rows = [c for c in cluster.connections(include_closed=True) if c.listener == "REAUTH"]
    assert max(c.reauthentications for c in rows) >= 2


def test_wrong_password_is_fatal_and_prompt(cluster: Cluster, pki: Pki) -> None:
    config = _sasl_ssl(cluster, pki, "SCRAM-SHA-512", sasl_password="not-her-password")

    async def main() -> None:
        producer = Producer(config)
        started = time.monotonic()
        with pytest.raises(SaslAuthenticationError) as info:
            await producer.start()
        assert isinstance(info.value, AuthenticationError)
        assert info.value.message and "not-her-password" not in str(info.value)
        # nothing retried: the send fails at once with the same error
        with pytest.raises(SaslAuthenticationError):
            await producer.send("anything", b"x")
        await producer.close()
        assert time.monotonic() - started < 30      # a bound, not a timing claim

    run(main())


def test_large_fetch_responses_over_tls(cluster: Cluster, pki: Pki) -> None:
    """Megabytes per Fetch response over TLS: the receive low-water mark (plaintext
    counts) must not be applied to a TLS socket, where it stalled the reader until the
    request timed out."""
    topic = f"sec-large-{next(_names)}"
    cluster.create_topic(topic, 1, 3)
    config = _sasl_ssl(cluster, pki, "SCRAM-SHA-512")
    value, n = b"x" * 1024, 4000

    async def go() -> None:
        async with Producer(config, linger_ms=5) as producer:
            await producer.send_batch(topic, [value] * n, partition=0)
        async with Consumer(config, auto_offset_reset="earliest", max_poll_records=100_000,
                            request_timeout_ms=60_000) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            got = 0
            for _ in range(50):
                batch = await consumer.getmany(timeout_ms=200)
                got += sum(len(records) for records in batch.values())
                if got >= n:
                    break
            assert got == n
            assert not [e for e in consumer.events() if e.kind == "disconnect"]

    run(go(), timeout=40)
