"""ListConfigResources (key 74), v0 and v1 (KIP-1142), with the answers a Kafka 4.4 broker
gave to the same requests: v0 lists the client metrics subscriptions; v1 lists the
resource types asked for (none: all), topics internal ones included, every broker as
BROKER and as BROKER_LOGGER, groups only once they have configs; an unknown type is
UNSUPPORTED_VERSION. kaflite's admin asks v1, and falls back to v0 for client metrics."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.client.admin import Admin, ConfigResource, NewTopic
from kaflite.client.consumer import TopicPartition
from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import ListConfigResourcesRequest

TOPIC, BROKER, LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


async def _listed(conn: BrokerConnection, version: int, types: list[int]
                  ) -> tuple[int, list[tuple[int, str]]]:
    resp = await conn.request(ListConfigResourcesRequest(resource_types=types), version=version)
    return resp.error_code, sorted((r.resource_type, r.resource_name)
                                   for r in resp.config_resources)


def test_each_version_lists_what_kafka_lists() -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster, \
                Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic("t1", 1, 1), NewTopic("t2", 1, 1)])
            await admin.alter_configs({
                ConfigResource(GROUP, "g1"): {"consumer.session.timeout.ms": "50000"},
                ConfigResource(CLIENT_METRICS, "sub1"): {"metrics": "org.apache"}})
            # a group without configs is not listed, though it has offsets
            await admin.alter_group_offsets("g2", {TopicPartition("t1", 0): 0})
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port,
                                          client_id="lister").open()
            try:
                topics = [(TOPIC, "__consumer_offsets"), (TOPIC, "t1"), (TOPIC, "t2")]
                brokers = [(BROKER, "0"), (BROKER, "1")]
                loggers = [(LOGGER, "0"), (LOGGER, "1")]
                assert await _listed(conn, 0, []) == (0, [(CLIENT_METRICS, "sub1")])
                assert await _listed(conn, 1, []) == (0, sorted(
                    topics + brokers + loggers + [(CLIENT_METRICS, "sub1"), (GROUP, "g1")]))
                assert await _listed(conn, 1, [TOPIC]) == (0, topics)
                assert await _listed(conn, 1, [GROUP]) == (0, [(GROUP, "g1")])
                assert await _listed(conn, 1, [BROKER]) == (0, brokers)
                assert await _listed(conn, 1, [LOGGER]) == (0, loggers)
                assert await _listed(conn, 1, [TOPIC, GROUP, TOPIC]) == (
                    0, [*topics, (GROUP, "g1")])
                for unknown in ([99], [0], [TOPIC, 99]):
                    assert await _listed(conn, 1, unknown) == (
                        errors.UnsupportedVersionError.code, [])
            finally:
                conn.close()
            # the admin's methods
            assert await admin.list_config_resources([GROUP, TOPIC]) == [
                ConfigResource(TOPIC, "__consumer_offsets"), ConfigResource(TOPIC, "t1"),
                ConfigResource(TOPIC, "t2"), ConfigResource(GROUP, "g1")]
            assert await admin.list_client_metrics_resources() == ["sub1"]
            with pytest.raises(errors.UnsupportedVersionError):
                await admin.list_config_resources([99])
    asyncio.run(asyncio.wait_for(main(), 60))
