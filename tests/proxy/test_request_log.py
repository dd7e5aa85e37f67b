"""The proxy writes the request log's records for the traffic it carries."""

from __future__ import annotations

import asyncio

from kaflite.client.sync import Producer
from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import MetadataRequest
from kaflite.protocol.messages import metadata_request as mq
from kaflite.proxy import Proxy
from tests.cluster.request_log._reader import Reader
from tests.conftest import wait_for


def _metadata_unknown(port: int) -> None:
    async def run() -> None:
        conn = await BrokerConnection("127.0.0.1", port, client_id="proxied-raw").open()
        try:
            await conn.request(MetadataRequest(
                topics=[mq.MetadataRequestTopic(name="no-such-topic")],
                allow_auto_topic_creation=False))
        finally:
            conn.close()

    asyncio.run(run())


def test_the_proxy_logs_what_it_carries_to_the_upstream_cluster() -> None:
    # the cluster's own log is off: every record here is the proxy's
    with Cluster(brokers=2) as cluster:
        cluster.create_topic("via-proxy", 2, 1, assignments=[[0], [1]])
        with Proxy(cluster.bootstrap_servers, request_log=True) as proxy:
            with Producer({"bootstrap.servers": proxy.bootstrap_servers,
                           "client.id": "proxied"}) as producer:
                for i in range(4):
                    producer.send("via-proxy", b"v", partition=i % 2)
                producer.flush(10)
            _metadata_unknown(proxy.port)
            log = proxy.request_log
            assert log is not None
            wait_for(lambda: log.publisher.written >= 1, "the proxy's first records written")
            reader = Reader(cluster.bootstrap_servers)
            try:
                seen = reader.wait(
                    lambda rs: {r.broker for r in rs if r.api == "Produce"} == {0, 1}
                    and any(r.client_id == "proxied-raw" for r in rs),
                    "the proxied produces and the failed metadata")
            finally:
                reader.close()
        assert log.publisher.stats()["buffered"] == 0    # flushed on stop
    assert {r.source for r in seen} == {"proxy"}
    produced = [r for r in seen if r.api == "Produce"]
    assert {r.client_id for r in produced} == {"proxied"}
    assert {p for r in produced for p in r.partitions} == {"via-proxy-0", "via-proxy-1"}
    assert all(r.roles == ["partition-leader"] and not r.errors for r in produced)
    assert any(r.api == "ApiVersions" and r.broker == -1 and r.software_name == "kaflite"
               for r in seen if r.client_id == "proxied")
    [failed] = [r for r in seen if r.client_id == "proxied-raw" and r.api == "Metadata"]
    assert failed.error == "UNKNOWN_TOPIC_OR_PARTITION" and failed.topics == ["no-such-topic"]
    # the publisher's own produces go straight upstream: none of them is in the log
    assert not [r for r in seen if r.client_id == "kaflite-proxy-request-log"]
