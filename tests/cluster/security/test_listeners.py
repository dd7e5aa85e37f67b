"""Several listeners per broker: each request is answered with the endpoints of
the listener it came in on; replication uses inter.broker.listener.name."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.listeners import parse_listeners, parse_protocol_map
from kaflite.config import ConfigError
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import (
    DescribeClusterRequest,
    FindCoordinatorRequest,
    MetadataRequest,
)
from kaflite.protocol.messages import metadata_request as mq
from tests.conftest import wait_for_async

LISTENERS = "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"
CONFIG = {"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
          "inter.broker.listener.name": "INTERNAL",
          "advertised.listeners": "EXTERNAL://localhost:0"}


def test_parse_listeners_and_protocol_map() -> None:
    pmap = parse_protocol_map(None)
    assert pmap["SASL_SSL"] == "SASL_SSL"
    specs = parse_listeners("PLAINTEXT://:9092,sasl_ssl://127.0.0.1:9093", pmap, "0.0.0.0")
    assert [(s.name, s.host, s.port, s.security_protocol) for s in specs] == [
        ("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT"), ("SASL_SSL", "127.0.0.1", 9093, "SASL_SSL")]
    assert specs[1].for_broker(2).port == 9095
    with pytest.raises(ConfigError, match="No security protocol"):
        parse_listeners("EXTERNAL://:1", pmap, "")
    with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map"):
        parse_protocol_map("EXTERNAL:TLS")
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name"):
        Cluster(brokers=1, listeners="PLAINTEXT://127.0.0.1:0",
                config={"inter.broker.listener.name": "NOPE"})


def test_each_listener_answers_with_its_own_endpoints() -> None:
    asyncio.run(_each_listener())


async def _each_listener() -> None:
    async with Cluster(brokers=3, listeners=LISTENERS, config=CONFIG) as cluster:
        b0 = cluster.broker(0)
        assert set(b0.bound) == {"INTERNAL", "EXTERNAL"}
        assert b0.bound["INTERNAL"] != b0.bound["EXTERNAL"]
        cluster.create_topic("t", partitions=1, replication_factor=3)
        for name, host in (("INTERNAL", "127.0.0.1"), ("EXTERNAL", "localhost")):
            h, port = b0.endpoint(name)
            assert h == host and port == b0.bound[name]
            conn = await BrokerConnection("127.0.0.1", b0.bound[name]).open()
            try:
                md = await conn.request(MetadataRequest(topics=[mq.MetadataRequestTopic(
                    name="t")], allow_auto_topic_creation=False))
                assert {(b.node_id, b.host, b.port) for b in md.brokers} == {
                    (n, host, cluster.broker(n).bound[name]) for n in range(3)}
                dc = await conn.request(DescribeClusterRequest())
                assert {(b.broker_id, b.host, b.port) for b in dc.brokers} == {
                    (n, host, cluster.broker(n).bound[name]) for n in range(3)}
                found = None
                for _ in range(100):   # the offsets topic is created by the first ask
                    fc = await conn.request(FindCoordinatorRequest(key="g", key_type=0),
                                            version=3)
                    if fc.error_code == 0:
                        found = fc
                        break
                    await asyncio.sleep(0.05)
                assert found is not None
                assert (found.host, found.port) == (
                    host, cluster.broker(found.node_id).bound[name])
            finally:
                conn.close()
        assert cluster.bootstrap("external") == ",".join(
            f"localhost:{cluster.broker(n).bound['EXTERNAL']}" for n in range(3))
        # followers fetch over the INTERNAL listener
        leader = cluster.controller.partition("t", 0)
        assert leader is not None
        internal_ports = {cluster.broker(n).bound["INTERNAL"] for n in range(3)}
        await wait_for_async(
            lambda: any(c.info.replica_id is not None for n in range(3)
                        for c in cluster.broker(n).connections.values()),
            "a replica fetcher connection")
        for n in range(3):
            for c in cluster.broker(n).connections.values():
                if c.info.replica_id is not None:
                    assert c.listener.name == "INTERNAL"
                    assert c.transport is not None
                    assert c.transport.get_extra_info("sockname")[1] in internal_ports
        # a restarted broker listens on the same ports again
        ports = dict(cluster.broker(1).bound)
        await cluster.restart_broker(1)
        assert cluster.broker(1).bound == ports
