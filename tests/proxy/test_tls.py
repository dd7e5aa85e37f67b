"""TLS on both sides of the proxy, with SASL passed through.

The cluster's listener is SASL_SSL; the proxy ends the client's TLS with a
certificate of its own, opens TLS again to the brokers (checking their
certificates), and forwards SaslHandshake and SaslAuthenticate like any other
request: confluent-kafka authenticates as alice with the upstream's users,
produces and reads back an exact count; a wrong password is refused by the
upstream, through the proxy.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.proxy import Proxy
from kaflite.security.certs import Pki, write_test_pki
from kaflite.security.tls import client_context, server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("proxy-pki"))


@pytest.fixture(scope="module")
def secured(pki: Pki) -> Iterator[Cluster]:
    config = {"sasl.users": "alice:alice-secret", "inter.broker.listener.name": "PLAINTEXT",
              **pki.broker_properties()}
    with Cluster(brokers=2, listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                 config=config) as c:
        yield c


def client(proxy: Any, pki: Pki, password: str = "alice-secret") -> dict[str, Any]:
    return {"bootstrap.servers": proxy.bootstrap_servers, "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": password,
            "ssl.ca.location": str(pki.ca)}


def test_tls_both_sides_and_sasl_passed_through(secured: Cluster, pki: Pki) -> None:
    from confluent_kafka import Consumer, Producer

    secured.create_topic("px-tls", 2, 2)
    with Proxy(secured.bootstrap("SASL_SSL"),
               ssl_context=server_context(str(pki.broker_cert), str(pki.broker_key)),
               upstream_ssl=client_context({"ssl.ca.location": str(pki.ca)})) as proxy:
        producer = Producer({**client(proxy, pki), "acks": "all"})
        for i in range(100):
            producer.produce("px-tls", f"s-{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({**client(proxy, pki), "group.id": "px-tls-g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["px-tls"])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
        consumer.close()
        assert sorted(got) == sorted(f"s-{i}".encode() for i in range(100))
        rows = proxy.connections(include_closed=True)
        assert rows and all(r.security_protocol == "SSL" for r in rows)
        assert any("SaslAuthenticate" in r.apis for r in rows)
        # the upstream's answer to a wrong password reaches the client
        bad = Producer({**client(proxy, pki, "wrong"), "message.timeout.ms": 3000})
        errors: list[str] = []
        bad.produce("px-tls", b"no", on_delivery=lambda err, msg: errors.append(str(err)))
        bad.flush(10)
        assert errors and errors[0] != "None"
        failed = [r for r in proxy.connections(include_closed=True)
                  if r.apis.get("SaslAuthenticate") and r.apis["SaslAuthenticate"].errors]
        assert any("SASL_AUTHENTICATION_FAILED" in r.apis["SaslAuthenticate"].errors
                   for r in failed)


def test_the_command_speaks_tls(secured: Cluster, pki: Pki) -> None:
    from confluent_kafka import Producer

    secured.create_topic("px-tls-cli", 1, 2)
    proc = subprocess.Popen([sys.executable, "-m", "kaflite.cli", "proxy", "--upstream",
                             secured.bootstrap("SASL_SSL"), "--listen", "127.0.0.1:0",
                             "--tls-cert", str(pki.broker_cert), "--tls-key",
                             str(pki.broker_key), "--upstream-ca", str(pki.ca)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
        producer = Producer({**client(at, pki), "acks": "all"})
        for i in range(10):
            producer.produce("px-tls-cli", f"{i}".encode())
        assert producer.flush(30) == 0
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
