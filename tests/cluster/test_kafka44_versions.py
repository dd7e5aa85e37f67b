"""Kafka 4.4's newer versions of ApiVersions, Metadata and DescribeCluster, in raw
requests at the exact version (issue 38), and the versions a schema calls unstable.

* ApiVersions v5 (KIP-1242): a request that names a cluster and node that are not
  the broker's gets REBOOTSTRAP_REQUIRED and nothing else; a null cluster is no claim.
* Metadata v13 (KIP-1102) carries a top-level error code, 0 in every answer.
* DescribeCluster v2 (KIP-1073) lists the fenced brokers too when asked, marked so.
* InitProducerId v6 is unstable in Kafka 4.4's schema: served and advertised only
  with ``unstable.api.versions.enable``, as Kafka's broker does.
* AlterPartitionReassignments v1 refuses a new replication factor when told to;
  DescribeLogDirs v5 says whether a directory is cordoned (never, in kaflite).
* Fetch v18 (KIP-1166) is served as v17; ListOffsets v11's earliest pending upload
  offset (KIP-1023) is -1 without tiered storage.
"""

from __future__ import annotations

import asyncio

import pytest

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection, ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ApiVersionsRequest,
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from kaflite.protocol.messages import alter_partition_reassignments_request as apq
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import list_offsets_request as lq
from kaflite.protocol.messages import metadata_request as mq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch, iter_record_set_records

INIT_PRODUCER_ID, LIST_OFFSETS, END_TXN = 22, 2, 26
CONSUMER_GROUP_HEARTBEAT, READ_SHARE_GROUP_STATE = 68, 84
UNSTABLE = {"unstable.api.versions.enable": "true"}


async def _open(cluster: Cluster, node: int) -> BrokerConnection:
    return await BrokerConnection("127.0.0.1", cluster.broker(node).port,
                                  client_id="v44-test").open()


def test_api_versions_v5_checks_the_cluster_and_node_the_client_names() -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            conn = await _open(cluster, 1)
            try:
                def ask(cluster_id: str | None, node_id: int) -> ApiVersionsRequest:
                    return ApiVersionsRequest(client_software_name="t",
                                              client_software_version="1",
                                              cluster_id=cluster_id, node_id=node_id)

                right = await conn.request(ask(cluster.cluster_id, 1), version=5)
                assert right.error_code == 0
                assert {a.api_key for a in right.api_keys} >= {18, 3, 1}
                for cluster_id, node_id in ((cluster.cluster_id, 0),      # another node
                                            ("some-other-cluster", 1),    # another cluster
                                            (cluster.cluster_id, -1)):    # the node unsaid
                    wrong = await conn.request(ask(cluster_id, node_id), version=5)
                    assert wrong.error_code == errors.RebootstrapRequiredError.code == 129
                    assert wrong.api_keys == [] and wrong.finalized_features == []
                # no cluster named: no claim, whatever the node
                unnamed = await conn.request(ask(None, 7), version=5)
                assert unnamed.error_code == 0 and unnamed.api_keys
                # v4 has no such fields: the same broker answers as before
                v4 = await conn.request(ApiVersionsRequest(client_software_name="t",
                                                           client_software_version="1"),
                                        version=4)
                assert v4.error_code == 0
                assert {(a.api_key, a.max_version) for a in v4.api_keys} >= {(18, 5), (3, 13)}
            finally:
                conn.close()

    asyncio.run(main())


def test_metadata_v13_answers_a_top_level_error_code_of_zero() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("m13", 2, 1)
            conn = await _open(cluster, 0)
            try:
                resp = await conn.request(MetadataRequest(
                    topics=[mq.MetadataRequestTopic(name="m13"),
                            mq.MetadataRequestTopic(name="absent")],
                    allow_auto_topic_creation=False), version=13)
                assert resp.error_code == 0
                by_name = {t.name: t for t in resp.topics}
                assert by_name["m13"].error_code == 0 and len(by_name["m13"].partitions) == 2
                assert by_name["absent"].error_code == errors.UnknownTopicOrPartitionError.code
                assert resp.cluster_id == cluster.cluster_id
            finally:
                conn.close()

    asyncio.run(main())


def test_describe_cluster_v2_lists_fenced_brokers_when_asked() -> None:
    async def main() -> None:
        async with Cluster(brokers=3) as cluster:
            await cluster.stop_broker(2)
            conn = await _open(cluster, 0)
            try:
                def brokers(resp: object) -> list[tuple[int, bool]]:
                    return [(b.broker_id, b.is_fenced) for b in resp.brokers]  # type: ignore[attr-defined]

                every = await conn.request(DescribeClusterRequest(
                    include_cluster_authorized_operations=False, endpoint_type=1,
                    include_fenced_brokers=True), version=2)
                assert every.error_code == 0
                assert brokers(every) == [(0, False), (1, False), (2, True)]
                live = await conn.request(DescribeClusterRequest(
                    include_cluster_authorized_operations=False, endpoint_type=1,
                    include_fenced_brokers=False), version=2)
                assert brokers(live) == [(0, False), (1, False)]
                v1 = await conn.request(DescribeClusterRequest(
                    include_cluster_authorized_operations=False, endpoint_type=1), version=1)
                assert brokers(v1) == [(0, False), (1, False)]
            finally:
                conn.close()

    asyncio.run(main())


@pytest.mark.parametrize("unstable", [False, True])
def test_unstable_versions_are_served_only_when_enabled(unstable: bool) -> None:
    async def main() -> None:
        config = UNSTABLE if unstable else {}
        async with Cluster(brokers=1, config=config) as cluster:
            conn = await _open(cluster, 0)
            try:
                resp = await conn.request(ApiVersionsRequest(client_software_name="t",
                                                             client_software_version="1"))
                ranges = {a.api_key: a.max_version for a in resp.api_keys}
                assert ranges[INIT_PRODUCER_ID] == (6 if unstable else 5)
                assert ranges[LIST_OFFSETS] == 11                  # stable
                # versions older schemas flagged unstable, which Kafka 4.4 serves as stable
                assert (ranges[END_TXN], ranges[CONSUMER_GROUP_HEARTBEAT]) == (5, 1)
                assert ranges[READ_SHARE_GROUP_STATE] == 0
                request = conn.request(InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=1000), version=6)
                if unstable:
                    answer = await request
                    assert answer.error_code == 0 and answer.producer_id >= 0
                    assert answer.ongoing_txn_producer_id == -1
                else:
                    # refused as any version the broker does not serve: the connection ends
                    with pytest.raises(ConnectionClosed):
                        await request
            finally:
                conn.close()

    asyncio.run(main())


def test_fetch_v18_and_list_offsets_v11() -> None:
    """Fetch v18 carries the fetcher's high watermark, which only KRaft reads: the
    answer is a v17's. ListOffsets v11 asks for the earliest offset not yet uploaded
    to tiered storage (-6); with no tiered storage it is -1, epoch -1, as Kafka's."""
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            t = cluster.create_topic("v18", 1, 1)
            conn = await _open(cluster, 0)
            try:
                produced = await conn.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                    pq.TopicProduceData(name="v18", partition_data=[pq.PartitionProduceData(
                        0, encode_batch([b"a", b"b", b"c"]))])]))
                assert produced.responses[0].partition_responses[0].error_code == 0
                for known_hw in (0, -1, fq.FetchPartition().high_watermark):
                    resp = await conn.request(FetchRequest(
                        max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_id=0,
                        session_epoch=-1, topics=[fq.FetchTopic(topic_id=t.topic_id, partitions=[
                            fq.FetchPartition(partition=0, fetch_offset=1,
                                              partition_max_bytes=1 << 20,
                                              high_watermark=known_hw)])]), version=18)
                    (part,) = resp.responses[0].partitions
                    assert resp.error_code == 0 and part.error_code == 0
                    assert part.high_watermark == 3
                    values = [r.value for r in iter_record_set_records(part.records or b"")]
                    assert values == [b"a", b"b", b"c"]     # (the batch holding offset 1)

                async def offset_of(timestamp: int, version: int) -> tuple[int, int, int, int]:
                    resp = await conn.request(ListOffsetsRequest(
                        replica_id=-1, isolation_level=0, topics=[lq.ListOffsetsTopic(
                            name="v18", partitions=[lq.ListOffsetsPartition(
                                partition_index=0, timestamp=timestamp)])]), version=version)
                    p = resp.topics[0].partitions[0]
                    return p.error_code, p.offset, p.timestamp, p.leader_epoch

                assert await offset_of(-6, 11) == (0, -1, -1, -1)     # earliest pending upload
                assert await offset_of(-5, 11) == (0, -1, -1, -1)     # latest tiered
                assert await offset_of(-1, 11) == (0, 3, -1, 0)
                assert await offset_of(-2, 11) == (0, 0, -1, 0)
                assert await offset_of(-1, 10) == (0, 3, -1, 0)
            finally:
                conn.close()

    asyncio.run(main())


def test_alter_partition_reassignments_v1_may_forbid_a_new_replication_factor() -> None:
    async def main() -> None:
        async with Cluster(brokers=3) as cluster:
            cluster.create_topic("rf", 3, 2)
            conn = await _open(cluster, 0)
            try:
                def moves(allow: bool, targets: dict[int, list[int]]
                          ) -> AlterPartitionReassignmentsRequest:
                    return AlterPartitionReassignmentsRequest(
                        timeout_ms=10_000, allow_replication_factor_change=allow,
                        topics=[apq.ReassignableTopic(name="rf", partitions=[
                            apq.ReassignablePartition(partition_index=p, replicas=r)
                            for p, r in targets.items()])])

                refused = await conn.request(moves(False, {0: [0, 1, 2], 1: [2]}), version=1)
                assert refused.allow_replication_factor_change is False
                got = {p.partition_index: (p.error_code, p.error_message)
                       for p in refused.responses[0].partitions}
                code = errors.InvalidReplicationFactorError.code
                assert got == {0: (code, "The replication factor is changed from 2 to 3"),
                               1: (code, "The replication factor is changed from 2 to 1")}
                assert [len(cluster.controller.partition("rf", p).replicas)  # type: ignore[union-attr]
                        for p in (0, 1)] == [2, 2]                     # nothing moved
                same = await conn.request(moves(False, {2: [2, 0]}), version=1)
                assert same.responses[0].partitions[0].error_code == 0
                allowed = await conn.request(moves(True, {0: [0, 1, 2]}), version=1)
                assert allowed.allow_replication_factor_change is True
                assert allowed.responses[0].partitions[0].error_code == 0
                # v0 cannot carry the flag (its default, true, is all it says): allowed
                v0 = await conn.request(moves(True, {1: [1]}), version=0)
                assert v0.responses[0].partitions[0].error_code == 0
            finally:
                conn.close()

    asyncio.run(main())


def test_describe_log_dirs_v5_reports_the_directory_not_cordoned() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("dirs", 2, 1)
            conn = await _open(cluster, 0)
            try:
                resp = await conn.request(DescribeLogDirsRequest(topics=None), version=5)
                (result,) = resp.results
                assert resp.error_code == 0 and result.error_code == 0
                assert result.is_cordoned is False and result.total_bytes > 0
                assert {(t.name, p.partition_index) for t in result.topics
                        for p in t.partitions} >= {("dirs", 0), ("dirs", 1)}
            finally:
                conn.close()

    asyncio.run(main())
