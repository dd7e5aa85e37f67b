"""The proxy's connection report: it agrees with the sockets the system reports
(psutil's ``net_connections``, what ``ss`` lists), and names the roles on the
seeds' fan-out: a confluent-kafka consumer of a 12-partition topic led by 12
brokers, one partition each. ``kaflite connections --proxy URL`` and
``/metrics`` show the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator

import psutil
import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.observe import ConnectionSnapshot
from kaflite.proxy import Proxy
from tests.conftest import wait_for

BROKERS = 12
TOPIC = "fanout"
GROUP = "fanout-g"


@pytest.fixture(scope="module")
def cluster12() -> Iterator[Cluster]:
    with Cluster(brokers=BROKERS) as cluster:
        cluster.create_topic(TOPIC, BROKERS, 1, assignments=[[n] for n in range(BROKERS)])
        yield cluster


def sockets_to(ports: set[int]) -> Counter[tuple[str, int]]:
    """ESTABLISHED sockets of this process that connect to one of ``ports``:
    (local address, remote port) -> how many."""
    found: Counter[tuple[str, int]] = Counter()
    for c in psutil.Process().net_connections(kind="tcp"):
        if c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr.port in ports:
            found[(f"{c.laddr.ip}:{c.laddr.port}", c.raddr.port)] += 1
    return found


def test_report_agrees_with_sockets_and_names_the_fanout(cluster12: Cluster) -> None:
    from confluent_kafka import Consumer, Producer

    with Proxy(cluster12.bootstrap_servers, http_port=0) as proxy:
        producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "linger.ms": 5})
        for p in range(BROKERS):
            for i in range(5):
                producer.produce(TOPIC, f"{p}-{i}".encode(), partition=p)
        assert producer.flush(30) == 0
        del producer
        consumer = Consumer({"bootstrap.servers": proxy.bootstrap_servers, "group.id": GROUP,
                             "client.id": "fanout-consumer", "auto.offset.reset": "earliest",
                             "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        consumer.subscribe([TOPIC])
        try:
            got = 0
            deadline = time.monotonic() + 60
            while got < BROKERS * 5 and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    got += 1
            assert got == BROKERS * 5

            def mine() -> list[ConnectionSnapshot]:
                return proxy.connections(client_id="fanout-consumer")

            def leaders() -> dict[int, list[str]]:
                return {c.broker: c.partitions for c in mine() if "partition-leader" in c.roles}

            # every broker leads one partition: one leader connection to each
            wait_for(lambda: len(leaders()) == BROKERS, "12 partition-leader connections",
                     state=leaders)
            assert leaders() == {n: [f"{TOPIC}-{n}"] for n in range(BROKERS)}
            coordinators = [c for c in mine() if "group-coordinator" in c.roles]
            assert len(coordinators) == 1 and coordinators[0].groups == [GROUP]
            assert all(c.software_name == "confluent-kafka-python" for c in mine())

            # the report agrees with the system's sockets: the clients' side (every
            # socket to a proxy port is a registry row, on the port of its broker)...
            port_of = {port: node for node, port in proxy.node_ports.items()}
            port_of[proxy.port] = -1

            def agree() -> bool:
                client_side = sockets_to(set(port_of))
                rows = proxy.connections()
                by_port = Counter(port_of[port] for (_, port), n in client_side.items()
                                  for _ in range(n))
                upstream = sockets_to({cluster12.broker(n).port for n in range(BROKERS)})
                ours = {local.rsplit(":", 2)[0]
                        for _, local in proxy.registry.upstream_sockets.values()}
                return ({a for a, _ in client_side} == {r.peer for r in rows}
                        and by_port == Counter(r.broker for r in rows)
                        and ours <= {a for a, _ in upstream})

            wait_for(agree, "the report to agree with the sockets")
            # ...and the upstream side: each node's connections end at that broker
            upstream = sockets_to({cluster12.broker(n).port for n in range(BROKERS)})
            broker_port = {cluster12.broker(n).port: n for n in range(BROKERS)}
            for cid, (_, where) in proxy.registry.upstream_sockets.items():
                ip, lport, _host, rport = where.split(":")
                assert upstream[(f"{ip}:{lport}", int(rport))] == 1
                node = proxy.registry.open[cid].broker_id
                if node >= 0:
                    assert broker_port[int(rport)] == node

            # the CLI and /metrics show the same
            url = proxy.http_url
            assert url is not None
            out = subprocess.run([sys.executable, "-m", "kaflite.cli", "connections",
                                  "--proxy", url, "--json", "--client-id", "fanout-consumer"],
                                 capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            rows = json.loads(out.stdout)
            assert sorted(r["broker"] for r in rows if "partition-leader" in r["roles"]) \
                == list(range(BROKERS))
            table = subprocess.run([sys.executable, "-m", "kaflite.cli", "connections",
                                    "--proxy", url], capture_output=True, text=True,
                                   timeout=60)
            assert "group:fanout-g" in table.stdout and "partition-leader" in table.stdout
            metrics = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
            line = next(m for m in metrics.splitlines()
                        if m.startswith('kaflite_proxy_connections{role="partition-leader"}'))
            assert float(line.split()[-1]) >= BROKERS
            assert 'kaflite_proxy_requests_total{api="Fetch"}' in metrics
        finally:
            consumer.close()
