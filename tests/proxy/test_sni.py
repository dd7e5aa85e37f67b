"""SNI routing: TLS on one port, one host name per broker.

The proxy advertises broker n as ``broker-<n>.px.localhost`` at its single port
and sends each TLS connection to the broker its ClientHello names. Those names
do not resolve through the system here (no nss-myhostname, and /etc/hosts is
not ours to edit), so each client gets a resolver trick: Python's ssl is given
``server_hostname=``; kaflite's client runs on asyncio's own loop with
``socket.getaddrinfo`` answering 127.0.0.1 for ``*.px.localhost``; and
confluent-kafka runs in a child process in a private mount namespace
(``unshare -m``) where a hosts file of the test's own is bind-mounted over
/etc/hosts (skipped where ``unshare`` is not permitted).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflite.client import Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.protocol.framing import decode_response, encode_request
from kaflite.protocol.messages import MetadataRequest, MetadataResponse
from kaflite.proxy import Proxy
from kaflite.security.certs import Pki, write_test_pki
from kaflite.security.tls import server_context
from tests.proxy.conftest import AddressWatch, assert_no_upstream_address

SUFFIX = "px.localhost"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return write_test_pki(tmp_path_factory.mktemp("sni-pki"),
                          hosts=("127.0.0.1", f"*.{SUFFIX}"))


@pytest.fixture(scope="module")
def sni_watch() -> AddressWatch:
    return AddressWatch()


@pytest.fixture(scope="module")
def sni_proxy(cluster3: Cluster, pki: Pki, sni_watch: AddressWatch) -> Iterator[Proxy]:
    with Proxy(cluster3.bootstrap_servers, sni_suffix=SUFFIX, filters=[sni_watch],
               ssl_context=server_context(str(pki.broker_cert), str(pki.broker_key))) as p:
        yield p


def open_tls(port: int, ca: Path, server_name: str | None) -> ssl.SSLSocket:
    """A TLS connection to the proxy's port whose ClientHello names ``server_name``
    (None: an IP address, so no SNI at all)."""
    context = ssl.create_default_context(cafile=str(ca))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(raw, server_hostname=server_name or "127.0.0.1")


def metadata(sock: ssl.SSLSocket) -> MetadataResponse:
    sock.sendall(b"".join(bytes(c) for c in encode_request(
        3, 12, 7, "sni-test", MetadataRequest(topics=None))))
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        assert chunk, "closed before the answer"
        data += chunk
    body = decode_response(data[4:], 3, 12)[1]
    assert isinstance(body, MetadataResponse)
    return body


def test_each_broker_name_reaches_its_broker(cluster3: Cluster, sni_proxy: Proxy,
                                             pki: Pki) -> None:
    socks = [open_tls(sni_proxy.port, pki.ca, None)]
    try:
        answer = metadata(socks[0])   # no SNI: a bootstrap connection
        advertised = {(b.node_id, b.host, b.port) for b in answer.brokers}
        assert advertised == {(n, f"broker-{n}.{SUFFIX}", sni_proxy.port)
                              for n in cluster3.brokers}
        for n in cluster3.brokers:
            socks.append(open_tls(sni_proxy.port, pki.ca, f"broker-{n}.{SUFFIX}"))
            assert {b.node_id for b in metadata(socks[-1]).brokers} == set(cluster3.brokers)
        rows = sni_proxy.connections()
        assert sorted(r.broker for r in rows) == sorted([-1, *cluster3.brokers])
        # each connection's upstream socket ends at the broker its name asked for
        by_port = {cluster3.broker(n).port: n for n in cluster3.brokers}
        sockets = sni_proxy.registry.upstream_sockets
        assert len(sockets) == len(rows)
        for cid, (_, where) in sockets.items():
            node = sni_proxy.registry.open[cid].broker_id
            if node >= 0:
                assert by_port[int(where.rsplit(":", 1)[1])] == node
    finally:
        for sock in socks:
            sock.close()


def test_kaflite_client_through_sni(cluster3: Cluster, sni_proxy: Proxy, pki: Pki,
                                    sni_watch: AddressWatch,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith("." + SUFFIX):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    cluster3.create_topic("px-sni", 3, 2)
    config = {"bootstrap.servers": sni_proxy.bootstrap_servers, "security.protocol": "SSL",
              "ssl.ca.location": str(pki.ca)}

    async def main() -> list[bytes]:
        async with Producer(config, linger_ms=0) as producer:
            for i in range(30):
                await producer.send("px-sni", f"v{i}".encode(), partition=i % 3)
        got: list[bytes] = []
        async with Consumer(config, group_id="px-sni-g",
                            auto_offset_reset="earliest") as consumer:
            consumer.subscribe(["px-sni"])
            for _ in range(150):
                got += [r.value for r in await consumer.poll(timeout_ms=200)
                        if r.value is not None]
                if len(got) >= 30:
                    break
        return got

    got = asyncio.run(asyncio.wait_for(main(), 60))
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(30))
    assert_no_upstream_address(sni_watch, cluster3, sni_proxy)
    leaders = {r.broker for r in sni_proxy.connections(include_closed=True)
               if "partition-leader" in r.roles}
    assert leaders == set(cluster3.brokers)


RDKAFKA_CHILD = """
import json, sys, time
from confluent_kafka import Consumer, Producer
bootstrap, ca, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
config = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca}
producer = Producer({**config, "acks": "all"})
for i in range(n):
    producer.produce(topic, f"r{i}".encode(), partition=i % 3)
left = producer.flush(30)
consumer = Consumer({**config, "group.id": topic + "-g", "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
got = []
deadline = time.monotonic() + 30
while len(got) < n and time.monotonic() < deadline:
    msg = consumer.poll(0.2)
    if msg is not None and not msg.error():
        got.append(msg.value().decode())
consumer.close()
print(json.dumps({"unflushed": left, "got": sorted(got)}))
"""


def private_hosts_prefix() -> list[str] | None:
    """``unshare`` arguments for a private mount namespace, if this machine allows one."""
    if shutil.which("unshare") is None:
        return None
    for args in (["unshare", "-m"], ["unshare", "-rm"]):
        probe = subprocess.run([*args, "true"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return args
    return None


def test_confluent_kafka_through_sni(cluster3: Cluster, sni_proxy: Proxy, pki: Pki,
                                     sni_watch: AddressWatch, tmp_path: Path) -> None:
    prefix = private_hosts_prefix()
    if prefix is None:
        pytest.skip("unshare cannot make a private mount namespace here")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(
        f"127.0.0.1 broker-{n}.{SUFFIX}\n" for n in cluster3.brokers))
    child = tmp_path / "child.py"
    child.write_text(RDKAFKA_CHILD)
    cluster3.create_topic("px-sni-rd", 3, 2)
    before = {r.connection_id for r in sni_proxy.connections(include_closed=True)}
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    out = subprocess.run([*prefix, "sh", "-c", script, str(hosts), sys.executable,
                          str(child), sni_proxy.bootstrap_servers, str(pki.ca), "px-sni-rd",
                          "40"], capture_output=True, text=True, timeout=120,
                         env=os.environ.copy())
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["unflushed"] == 0
    assert result["got"] == sorted(f"r{i}" for i in range(40))
    assert_no_upstream_address(sni_watch, cluster3, sni_proxy)
    rows = [r for r in sni_proxy.connections(include_closed=True)
            if r.connection_id not in before]
    leaders = {r.broker for r in rows if "partition-leader" in r.roles}
    assert leaders == set(cluster3.brokers)


def test_the_command_wants_tls_for_sni() -> None:
    out = subprocess.run([sys.executable, "-m", "kaflite.cli", "proxy", "--upstream",
                          "127.0.0.1:1", "--listen", "127.0.0.1:0", "--sni-suffix", SUFFIX],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "SNI routing needs TLS" in out.stderr
