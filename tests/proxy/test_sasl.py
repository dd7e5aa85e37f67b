"""SASL ends at the proxy, and the proxy logs in upstream with its own credentials.

The cluster's SASL listener knows only the proxy's service user; the proxy knows
only alice. So a client gets through only if the proxy authenticates it (the
upstream would refuse alice) and the proxy authenticates itself upstream (the
upstream refuses unauthenticated requests). confluent-kafka (PLAIN,
SCRAM-SHA-256) and kaflite's client (SCRAM-SHA-512) produce and read back exact
counts; a wrong password gets SASL_AUTHENTICATION_FAILED and the connection
closes; the proxy's registry names alice, the upstream's names the proxy.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from kaflite.protocol.connection import SaslAuthenticationError
from kaflite.protocol.framing import decode_response, encode_request
from kaflite.protocol.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    Struct,
)
from kaflite.proxy import Proxy, ProxySasl, UpstreamSasl

SASL_AUTHENTICATION_FAILED = errors.SaslAuthenticationFailedError.code


@pytest.fixture(scope="module")
def upstream() -> Iterator[Cluster]:
    config = {"sasl.users": "proxy-svc:svc-secret", "inter.broker.listener.name": "PLAINTEXT",
              "group.initial.rebalance.delay.ms": "0"}
    with Cluster(brokers=2, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 config=config) as c:
        yield c


def sasl_proxy(cluster: Cluster, password: str = "svc-secret") -> Proxy:
    return Proxy(cluster.bootstrap("SASL_PLAINTEXT"),
                 sasl=ProxySasl({"alice": "alice-secret"}),
                 upstream_sasl=UpstreamSasl("SCRAM-SHA-256", "proxy-svc", password))


def client(proxy: Any, mechanism: str, password: str = "alice-secret") -> dict[str, Any]:
    return {"bootstrap.servers": proxy.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password}


def rdkafka_round_trip(config: dict[str, Any], topic: str, n: int) -> list[bytes]:
    from confluent_kafka import Consumer as RdConsumer
    from confluent_kafka import Producer as RdProducer

    producer = RdProducer({**config, "acks": "all"})
    for i in range(n):
        producer.produce(topic, f"{topic}-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = RdConsumer({**config, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    return got


def test_confluent_kafka_plain_and_scram(upstream: Cluster) -> None:
    for mechanism, topic in (("PLAIN", "px-sasl-plain"), ("SCRAM-SHA-256", "px-sasl-scram")):
        upstream.create_topic(topic, 2, 2)
        with sasl_proxy(upstream) as proxy:
            got = rdkafka_round_trip(client(proxy, mechanism), topic, 50)
            assert sorted(got) == sorted(f"{topic}-{i}".encode() for i in range(50))
            rows = proxy.connections(include_closed=True)
            assert rows and all(r.security_protocol == "SASL_PLAINTEXT" for r in rows)
            authed = [r for r in rows if r.sasl_mechanism is not None]
            assert authed and {r.principal for r in authed} == {"User:alice"}
            assert {r.sasl_mechanism for r in authed} == {mechanism}
            # upstream, every connection from the proxy is the proxy's service user
            seen = {c.principal for c in upstream.connections(include_closed=True)
                    if c.security_protocol == "SASL_PLAINTEXT"}
            assert seen == {"User:proxy-svc"}


def test_kaflite_client_scram_512_and_a_wrong_password(upstream: Cluster) -> None:
    topic = "px-sasl-kaflite"
    upstream.create_topic(topic, 2, 2)
    with sasl_proxy(upstream) as proxy:
        config = client(proxy, "SCRAM-SHA-512")

        async def main() -> list[bytes]:
            async with Producer(config, linger_ms=0) as producer:
                for i in range(30):
                    await producer.send(topic, f"k{i}".encode())
            got: list[bytes] = []
            async with Consumer(config, group_id="px-sasl-k",
                                auto_offset_reset="earliest") as consumer:
                consumer.subscribe([topic])
                for _ in range(150):
                    got += [r.value for r in await consumer.poll(timeout_ms=200)
                            if r.value is not None]
                    if len(got) >= 30:
                        break
            bad = Producer(client(proxy, "SCRAM-SHA-512", "not-her-password"))
            with pytest.raises(SaslAuthenticationError):
                await bad.start()
            await bad.close()
            return got

        got = asyncio.run(asyncio.wait_for(main(), 60))
        assert sorted(got) == sorted(f"k{i}".encode() for i in range(30))
        rows = proxy.connections(include_closed=True)
        assert any(r.principal == "User:alice" and r.sasl_mechanism == "SCRAM-SHA-512"
                   for r in rows)
        failed = [r for r in rows if r.apis.get("SaslAuthenticate")
                  and "SASL_AUTHENTICATION_FAILED" in r.apis["SaslAuthenticate"].errors]
        assert failed and all(r.closed_at is not None for r in failed)


class Wire:
    """A bare socket speaking requests, to watch the proxy answer and close."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.corr = 0

    def call(self, api_key: int, version: int, request: Struct) -> Struct:
        self.corr += 1
        self.sock.sendall(b"".join(bytes(c) for c in
                                   encode_request(api_key, version, self.corr, "wire", request)))
        size = struct.unpack(">i", self.recv(4))[0]
        return decode_response(self.recv(size), api_key, version)[1]

    def recv(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True

    def close(self) -> None:
        self.sock.close()


def test_wrong_password_and_unauthenticated_requests_close(upstream: Cluster) -> None:
    with sasl_proxy(upstream) as proxy:
        wire = Wire(proxy.port)
        try:
            shake = wire.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            assert isinstance(shake, SaslHandshakeResponse) and shake.error_code == 0
            assert set(shake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
            reply = wire.call(36, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"))
            assert isinstance(reply, SaslAuthenticateResponse)
            assert reply.error_code == SASL_AUTHENTICATION_FAILED
            assert "nope" not in (reply.error_message or "")
            assert wire.closed()
        finally:
            wire.close()
        wire = Wire(proxy.port)   # Metadata before authenticating: closed, no answer
        try:
            wire.sock.sendall(b"".join(bytes(c) for c in encode_request(
                3, 12, 1, "wire", MetadataRequest(topics=None))))
            assert wire.closed()
        finally:
            wire.close()


def test_a_wrong_upstream_password_closes_the_client(upstream: Cluster) -> None:
    with sasl_proxy(upstream, password="wrong") as proxy:
        wire = Wire(proxy.port)
        try:
            wire.sock.sendall(b"".join(bytes(c) for c in encode_request(
                17, 1, 1, "wire", SaslHandshakeRequest(mechanism="PLAIN"))))
            # the failed login upstream closes the client's connection (after the
            # proxy's own answer to the handshake, if that came first): read to EOF
            # (a socket timeout fails the test)
            while wire.sock.recv(4096):
                pass
        finally:
            wire.close()


def test_the_command_ends_sasl(upstream: Cluster) -> None:
    from confluent_kafka import Producer as RdProducer

    upstream.create_topic("px-sasl-cli", 1, 2)
    env = {**os.environ, "KAFLITE_PROXY_UPSTREAM_PASSWORD": "svc-secret"}
    proc = subprocess.Popen([sys.executable, "-m", "kaflite.cli", "proxy", "--upstream",
                             upstream.bootstrap("SASL_PLAINTEXT"), "--listen", "127.0.0.1:0",
                             "--sasl-users", "alice:alice-secret",
                             "--upstream-sasl-mechanism", "SCRAM-SHA-512",
                             "--upstream-sasl-username", "proxy-svc"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        bootstrap = ""
        for _ in range(20):   # the banner's few lines
            line = proc.stdout.readline()
            if line.startswith("bootstrap.servers="):
                bootstrap = line.split("=", 1)[1].strip()
                break
        assert bootstrap
        at = type("At", (), {"bootstrap_servers": bootstrap})()
        producer = RdProducer({**client(at, "SCRAM-SHA-256"), "acks": "all"})
        for i in range(10):
            producer.produce("px-sasl-cli", f"{i}".encode())
        assert producer.flush(30) == 0
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
