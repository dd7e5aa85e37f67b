"""Share-group APIs spoken directly: Kafka's answers to good and bad requests."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    ProduceRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from kaflite.protocol.messages import alter_share_group_offsets_request as asq
from kaflite.protocol.messages import delete_share_group_offsets_request as dlq
from kaflite.protocol.messages import describe_share_group_offsets_request as dsq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.messages import share_acknowledge_request as saq
from kaflite.protocol.messages import share_fetch_request as sfq
from kaflite.protocol.records import encode_batch
from tests.conftest import wait_for_async

GROUP, TOPIC = "proto", "proto"
VERSION = [2]    # the version the test speaks (set per parametrized run)
CLUSTER: list[Cluster] = []


def fetch(topic_id: uuid.UUID, member: str, epoch: int, acks: list[tuple[int, int, list[int]]]
          | None = None, max_records: int = 100, mode: int = 0, renew: bool = False,
          partitions: bool = True, batch_size: int = 100) -> ShareFetchRequest:
    parts = [sfq.FetchPartition(partition_index=0, acknowledgement_batches=[
        sfq.AcknowledgementBatch(a, b, t) for a, b, t in acks or []])] if partitions else []
    req = ShareFetchRequest(group_id=GROUP, member_id=member, share_session_epoch=epoch,
                            max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                            max_records=max_records, batch_size=batch_size,
                            topics=[sfq.FetchTopic(topic_id, parts)] if parts else [])
    if VERSION[0] >= 2:
        req.share_acquire_mode, req.is_renew_ack = mode, renew
    return req


def ack(topic_id: uuid.UUID, member: str, epoch: int, acks: list[tuple[int, int, list[int]]],
        renew: bool = False) -> ShareAcknowledgeRequest:
    return ShareAcknowledgeRequest(
        group_id=GROUP, member_id=member, share_session_epoch=epoch,
        is_renew_ack=renew and VERSION[0] >= 2, topics=[saq.AcknowledgeTopic(topic_id, [saq.AcknowledgePartition(0, [
            saq.AcknowledgementBatch(a, b, t) for a, b, t in acks])])])


def acquired(resp: ShareFetchResponse) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def part(resp: ShareFetchResponse) -> tuple[int, int]:
    p = resp.responses[0].partitions[0]
    return p.error_code, p.acknowledge_error_code


@pytest.mark.parametrize("version", [1, 2])
def test_share_apis_and_their_errors(version: int) -> None:
    VERSION[0] = version

    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            CLUSTER[:] = [cluster]
            broker = cluster.broker(0)
            assert broker.share is not None
            broker.share.group_configs[GROUP] = {"share.auto.offset.reset": "earliest"}
            topic_id = cluster.create_topic(TOPIC, 1, 1).topic_id
            conn = await BrokerConnection("127.0.0.1", broker.port).open()
            try:
                for _ in range(4):
                    resp = await conn.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                        pq.TopicProduceData(name=TOPIC, partition_data=[pq.PartitionProduceData(
                            0, encode_batch([b"v"] * 5))])]))
                    assert resp.responses[0].partition_responses[0].error_code == 0
                await heartbeats(conn, topic_id)
                await fetching(conn, topic_id, version)
                await offsets(conn, topic_id)
            finally:
                conn.close()
    asyncio.run(main())


async def heartbeats(conn: BrokerConnection, topic_id: uuid.UUID) -> None:
    def hb(member: str, epoch: int, topics: list[str] | None = None) -> ShareGroupHeartbeatRequest:
        return ShareGroupHeartbeatRequest(group_id=GROUP, member_id=member, member_epoch=epoch,
                                          subscribed_topic_names=topics)

    for _ in range(100):   # FindCoordinator creates __consumer_offsets; then it loads
        found = await conn.request(FindCoordinatorRequest(key=GROUP, key_type=0), version=3)
        probe = await conn.request(hb("m0", 7))
        if found.error_code == 0 and probe.error_code == errors.GroupIdNotFoundError.code:
            break
        await asyncio.sleep(0.05)
    assert (await conn.request(hb("", 0, [TOPIC]))).error_code == errors.InvalidRequestError.code
    assert (await conn.request(hb("m1", 0))).error_code == errors.InvalidRequestError.code
    joined = await conn.request(hb("m1", 0, [TOPIC]))
    assert joined.error_code == 0 and joined.member_id == "m1" and joined.member_epoch == 1
    assert joined.assignment is not None
    assert [(t.topic_id, t.partitions) for t in joined.assignment.topic_partitions] == \
        [(topic_id, [0])]
    second = await conn.request(hb("m2", 0, [TOPIC]))
    assert second.member_epoch == 2
    again = await conn.request(hb("m1", 1))
    assert again.error_code == 0 and again.member_epoch == 2 and again.assignment is None
    assert (await conn.request(hb("m1", 7))).error_code == errors.FencedMemberEpochError.code
    assert (await conn.request(hb("nobody", 3))).error_code == errors.UnknownMemberIdError.code
    described = await conn.request(ShareGroupDescribeRequest(group_ids=[GROUP, "none"]))
    g = described.groups[0]
    assert g.error_code == 0 and g.assignor_name == "simple" and g.group_epoch == 2
    assert sorted(m.member_id for m in g.members) == ["m1", "m2"]
    assert described.groups[1].error_code == errors.GroupIdNotFoundError.code
    listed = await conn.request(ListGroupsRequest(types_filter=["share"]))
    assert [(x.group_id, x.group_type) for x in listed.groups] == [(GROUP, "share")]
    # forget_member (chaos) drops a share member: its next heartbeat is UNKNOWN_MEMBER_ID
    assert CLUSTER[0].faults.forget_member(GROUP, "m2")
    assert (await conn.request(hb("m2", 2))).error_code == errors.UnknownMemberIdError.code
    assert (await conn.request(hb("m2", 0, [TOPIC]))).error_code == 0       # it rejoins
    deleted = await conn.request(DeleteGroupsRequest(groups_names=[GROUP]))
    assert deleted.results[0].error_code == errors.NonEmptyGroupError.code


async def fetching(conn: BrokerConnection, topic_id: uuid.UUID, version: int) -> None:
    # Acknowledgements may not open a session; ShareAcknowledge cannot open one at all.
    bad = await conn.request(fetch(topic_id, "m1", 0, [(0, 0, [1])]), version=version)
    assert bad.error_code == errors.InvalidRequestError.code
    assert (await conn.request(ack(topic_id, "m1", 0, [(0, 0, [1])]), version=version)
            ).error_code == errors.InvalidShareSessionEpochError.code
    first = await conn.request(fetch(topic_id, "m1", 0, max_records=7), version=version)
    assert first.error_code == 0
    if version >= 1:
        assert first.acquisition_lock_timeout_ms == 30000
    assert acquired(first) == [(0, 9, 1)]       # whole batches (5 records each) up to 7
    assert first.responses[0].partitions[0].records
    # Another member's session: what m1 holds is not given again.
    other = await conn.request(fetch(topic_id, "m2", 0, max_records=3, mode=1),
                               version=version)
    assert acquired(other) == ([(10, 12, 1)] if version >= 2 else [(10, 14, 1)])
    # Stale and unknown sessions.
    stale = await conn.request(fetch(topic_id, "m1", 5), version=version)
    assert stale.error_code == errors.InvalidShareSessionEpochError.code
    unknown = await conn.request(fetch(topic_id, "m9", 1), version=version)
    assert unknown.error_code == errors.ShareSessionNotFoundError.code
    # Acknowledging what m1 does not hold; overlapping batches; an unknown type.
    wrong = await conn.request(fetch(topic_id, "m1", 1, [(10, 10, [1])], max_records=1),
                               version=version)
    assert part(wrong)[1] == errors.InvalidRecordStateError.code
    overlap = await conn.request(ack(topic_id, "m1", 2, [(0, 3, [1]), (2, 4, [1])]),
                                 version=version)
    assert overlap.responses[0].partitions[0].error_code == errors.InvalidRequestError.code
    badtype = await conn.request(ack(topic_id, "m1", 3, [(0, 0, [7])]), version=version)
    assert badtype.responses[0].partitions[0].error_code == errors.InvalidRequestError.code
    # RENEW needs IsRenewAck (v2); then the record stays acquired.
    if version >= 2:
        norenew = await conn.request(ack(topic_id, "m1", 4, [(0, 0, [4])]), version=version)
        assert norenew.responses[0].partitions[0].error_code == errors.InvalidRequestError.code
        renewed = await conn.request(ack(topic_id, "m1", 5, [(0, 0, [4])], renew=True),
                                     version=version)
        assert renewed.responses[0].partitions[0].error_code == 0
        assert renewed.acquisition_lock_timeout_ms == 30000
        # A renewing ShareFetch fetches nothing, and must say so (limits all 0).
        eager = await conn.request(fetch(topic_id, "m1", 6, [(1, 1, [4])], renew=True),
                                   version=version)
        assert eager.error_code == errors.InvalidRequestError.code
        quiet = fetch(topic_id, "m1", 6, [(1, 1, [4])], renew=True)
        quiet.max_wait_ms = quiet.min_bytes = quiet.max_bytes = quiet.max_records = 0
        renew_fetch = await conn.request(quiet, version=version)
        assert renew_fetch.error_code == 0 and part(renew_fetch) == (0, 0)
        assert acquired(renew_fetch) == []
        epoch = 7
    else:
        epoch = 4
    # Accept 0-4, release 5-9 (piggy-backed on a fetch of nothing new for m1).
    mixed = await conn.request(ack(topic_id, "m1", epoch, [(0, 4, [1]), (5, 9, [2])]),
                               version=version)
    assert mixed.responses[0].partitions[0].error_code == 0
    # The released records come back, to whoever fetches next, with delivery count 2.
    redo = await conn.request(fetch(topic_id, "m1", epoch + 1, max_records=5), version=version)
    assert acquired(redo) == [(5, 9, 2)]
    # Closing m2's session releases what it holds.
    closed = await conn.request(fetch(topic_id, "m2", -1, partitions=False), version=version)
    assert closed.error_code == 0
    after = await conn.request(fetch(topic_id, "m1", epoch + 2, max_records=100),
                               version=version)
    assert acquired(after)[0][:2] == (10, 12) or acquired(after)[0][:2] == (10, 14)
    assert acquired(after)[0][2] == 2



async def offsets(conn: BrokerConnection, topic_id: uuid.UUID) -> None:
    """DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets."""
    def describe() -> DescribeShareGroupOffsetsRequest:
        return DescribeShareGroupOffsetsRequest(groups=[
            dsq.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=None)])

    busy = await conn.request(AlterShareGroupOffsetsRequest(group_id=GROUP, topics=[
        asq.AlterShareGroupOffsetsRequestTopic(TOPIC, [
            asq.AlterShareGroupOffsetsRequestPartition(0, 12)])]))
    assert busy.error_code == errors.NonEmptyGroupError.code
    seen = await conn.request(describe(), version=1)
    p = seen.groups[0].topics[0].partitions[0]
    assert (seen.groups[0].topics[0].topic_name, p.start_offset, p.lag) == (TOPIC, 5, 15)
    for member in ("m1", "m2"):
        left = await conn.request(ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=member, member_epoch=-1))
        assert left.error_code == 0
    # m1 closes its share session (m2's is closed already): what it held is released
    last = await conn.request(fetch(topic_id, "m1", -1, partitions=False))
    assert last.error_code == 0
    altered = await conn.request(AlterShareGroupOffsetsRequest(group_id=GROUP, topics=[
        asq.AlterShareGroupOffsetsRequestTopic(TOPIC, [
            asq.AlterShareGroupOffsetsRequestPartition(0, 12)])]))
    assert altered.error_code == 0 and altered.responses[0].partitions[0].error_code == 0
    seen = await conn.request(describe(), version=0)
    assert seen.groups[0].topics[0].partitions[0].start_offset == 12
    # The leader's cached state is fenced: a new member starts at 12, first delivery.
    fresh = await conn.request(fetch(topic_id, "m3", 0, max_records=100))
    assert acquired(fresh) == [(12, 19, 1)]
    closed = await conn.request(fetch(topic_id, "m3", -1, partitions=False))
    assert closed.error_code == 0
    gone = await conn.request(DeleteShareGroupOffsetsRequest(group_id=GROUP, topics=[
        dlq.DeleteShareGroupOffsetsRequestTopic(TOPIC)]))
    assert gone.error_code == 0 and gone.responses[0].error_code == 0
    assert (await conn.request(describe())).groups[0].topics == []
    deleted = await conn.request(DeleteGroupsRequest(groups_names=[GROUP]))
    assert deleted.results[0].error_code == 0
    listed = await conn.request(ListGroupsRequest(types_filter=["share"]))
    assert listed.groups == []
    # Alter on no group makes one, as Kafka does (franz-go's TestShareGroupOffsetsAdmin);
    # an Alter that sets nothing leaves none behind.
    nothing = await conn.request(AlterShareGroupOffsetsRequest(group_id="made", topics=[
        asq.AlterShareGroupOffsetsRequestTopic("no-such-topic", [
            asq.AlterShareGroupOffsetsRequestPartition(0, 3)])]))
    assert nothing.error_code == 0
    assert nothing.responses[0].partitions[0].error_code == errors.UnknownTopicOrPartitionError.code
    assert (await conn.request(ListGroupsRequest(types_filter=["share"]))).groups == []
    made = await conn.request(AlterShareGroupOffsetsRequest(group_id="made", topics=[
        asq.AlterShareGroupOffsetsRequestTopic(TOPIC, [
            asq.AlterShareGroupOffsetsRequestPartition(0, 3)])]))
    assert made.error_code == 0 and made.responses[0].partitions[0].error_code == 0
    listed = await conn.request(ListGroupsRequest(types_filter=["share"]))
    assert [x.group_id for x in listed.groups] == ["made"]
    seen = await conn.request(DescribeShareGroupOffsetsRequest(groups=[
        dsq.DescribeShareGroupOffsetsRequestGroup(group_id="made", topics=None)]))
    assert seen.groups[0].topics[0].partitions[0].start_offset == 3
    # Describe does not look for the group (Kafka's GroupCoordinatorService): none, no
    # error and no partitions (the Java admin's listShareGroupOffsets answers {})
    none = await conn.request(DescribeShareGroupOffsetsRequest(groups=[
        dsq.DescribeShareGroupOffsetsRequestGroup(group_id="no-such-group", topics=None)]))
    assert (none.groups[0].error_code, none.groups[0].topics) == (0, [])


def test_share_faults() -> None:
    """expire_share_locks, bump_share_state_epoch and injected share errors."""
    VERSION[0] = 2

    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            broker = cluster.broker(0)
            assert broker.share is not None
            broker.share.group_configs[GROUP] = {"share.auto.offset.reset": "earliest"}
            topic_id = cluster.create_topic(TOPIC, 1, 1).topic_id
            conn = await BrokerConnection("127.0.0.1", broker.port).open()
            try:
                resp = await conn.request(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                    pq.TopicProduceData(name=TOPIC, partition_data=[pq.PartitionProduceData(
                        0, encode_batch([b"v"] * 10))])]))
                assert resp.responses[0].partition_responses[0].error_code == 0
                held = await conn.request(fetch(topic_id, "m1", 0, batch_size=4))
                # BatchSize (KIP-1206): AcquiredRecords of at most that many records
                assert acquired(held) == [(0, 3, 1), (4, 7, 1), (8, 9, 1)]
                assert cluster.faults.expire_share_locks(GROUP, TOPIC, 0, "m1") == 10
                again = await conn.request(fetch(topic_id, "m2", 0))
                assert acquired(again) == [(0, 9, 2)]
                assert cluster.faults.bump_share_state_epoch(GROUP, TOPIC, 0)
                coordinator = broker.share_coordinator
                assert coordinator is not None
                await wait_for_async(lambda: coordinator.states()[(GROUP, topic_id, 0)]
                                     .state_epoch == 1, "the new state epoch")
                fenced = await conn.request(ack(topic_id, "m2", 1, [(0, 9, [1])]))
                assert fenced.responses[0].partitions[0].error_code == \
                    errors.FencedStateEpochError.code
                # The leader read the state back: the records are there again.
                reread = await conn.request(fetch(topic_id, "m2", 2))
                assert acquired(reread) == [(0, 9, 3)]
                cluster.faults.inject_error("ShareFetch", "SHARE_SESSION_NOT_FOUND")
                injected = await conn.request(fetch(topic_id, "m2", 3))
                assert injected.error_code == errors.ShareSessionNotFoundError.code
            finally:
                conn.close()
    asyncio.run(main())


def test_read_committed_share_groups_skip_aborted_records() -> None:
    """share.isolation.level=read_committed: records of aborted transactions and the
    transaction markers are never delivered; read_uncommitted delivers aborted ones."""
    ck = pytest.importorskip("confluent_kafka")
    VERSION[0] = 2

    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            broker = cluster.broker(0)
            assert broker.share is not None
            broker.share.group_configs["rc"] = {"share.auto.offset.reset": "earliest",
                                                "share.isolation.level": "read_committed"}
            broker.share.group_configs["ru"] = {"share.auto.offset.reset": "earliest"}
            topic_id = cluster.create_topic(TOPIC, 1, 1).topic_id

            def produce() -> None:
                p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "transactional.id": "share-txn"})
                p.init_transactions(30)
                p.begin_transaction()
                for i in range(3):
                    p.produce(TOPIC, f"aborted-{i}".encode(), partition=0)
                p.flush(30)
                p.abort_transaction(30)
                p.begin_transaction()
                for i in range(2):
                    p.produce(TOPIC, f"committed-{i}".encode(), partition=0)
                p.commit_transaction(30)

            await asyncio.get_running_loop().run_in_executor(None, produce)
            conn = await BrokerConnection("127.0.0.1", broker.port).open()
            try:
                def req(group: str) -> ShareFetchRequest:
                    r = fetch(topic_id, "m", 0)
                    r.group_id = group
                    return r
                committed = await conn.request(req("rc"))
                # 0-2 aborted, 3 the ABORT marker, 4-5 committed, 6 the COMMIT marker
                assert acquired(committed) == [(4, 5, 1)]
                everything = await conn.request(req("ru"))
                assert acquired(everything) == [(0, 2, 1), (4, 5, 1)]
            finally:
                conn.close()
    asyncio.run(main())
