"""Replication throttling (KIP-73): ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` with the topics' throttled replica lists.

The checks are on bytes against the quota's rate, not on how fast a busy machine is:
a throttled catch-up of D bytes at R bytes/s cannot end before (D - one fetch - R) / R
seconds (the quota lets through R bytes a second, over a window of at least one
second, plus the fetch that crosses it); a slow machine only makes it later. That an
unthrottled one is not held back is read from the quotas' own counters.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kaflite.client.admin import Admin, ConfigResource
from kaflite.cluster import Cluster
from kaflite.cluster.handlers.configs import _describe_broker
from kaflite.cluster.quotas.rate import QuotaWindows, SimpleRate
from kaflite.cluster.quotas.replication import throttled_partitions, valid_throttled_replicas
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import AlterPartitionReassignmentsRequest, ProduceRequest
from kaflite.protocol.messages import alter_partition_reassignments_request as apr
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch
from tests.conftest import wait_for_async

TOPIC, BROKER = 2, 4
FETCH = 16 * 1024            # replica.fetch.max.bytes: what one fetch moves at most
BATCH = [b"x" * 1000] * 4    # one batch: about 4 KB
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", \
    "follower.replication.throttled.rate"
LEADER_LIST, FOLLOWER_LIST = "leader.replication.throttled.replicas", \
    "follower.replication.throttled.replicas"


def test_throttled_replica_lists_parse_as_kafka_parses_them() -> None:
    assert throttled_partitions("0:1,1:2, 2:1", 1) == frozenset({0, 2})
    assert throttled_partitions("0:1", 2) == frozenset()
    assert throttled_partitions(" * ", 7) is None
    for good in ("", "*", "0:1", "0:1, 1:2", "0:1,"):
        assert valid_throttled_replicas(good), good
    for bad in ("x", "0", "0:1,*", "0:a", "-1:0"):
        assert not valid_throttled_replicas(bad), bad


def test_simple_rate_takes_at_least_one_window() -> None:
    rate = SimpleRate(QuotaWindows(11, 1000))
    rate.record(1000, 0)
    assert rate.measure(10) == 1000            # over one window, not 10 ms
    rate.record(1000, 1500)
    assert rate.measure(2000) == 1000          # 2000 bytes over the 2 s since the first


async def _produce(conn: BrokerConnection, topic: str, batches: int, acks: int = 1) -> int:
    """``batches`` batches, one request each; the bytes appended."""
    size = 0
    for _ in range(batches):
        batch = encode_batch(BATCH)
        resp = await conn.request(ProduceRequest(acks=acks, timeout_ms=30000, topic_data=[
            pq.TopicProduceData(name=topic, partition_data=[pq.PartitionProduceData(0, batch)])]))
        assert resp.responses[0].partition_responses[0].error_code == 0
        size += len(batch)
    return size


async def _reassign(conn: BrokerConnection, topic: str, replicas: list[int]) -> None:
    resp = await conn.request(AlterPartitionReassignmentsRequest(timeout_ms=5000, topics=[
        apr.ReassignableTopic(topic, [apr.ReassignablePartition(0, replicas)])]))
    assert resp.responses[0].partitions[0].error_code == 0


async def _move(cluster: Cluster, admin: Admin, topic: str, configs: dict[
        ConfigResource, dict[str, str | None]]) -> tuple[int, float]:
    """Write to ``topic`` (on broker 0 alone), set ``configs``, reassign it to broker 1;
    (bytes moved, seconds until broker 1 had them all)."""
    cluster.create_topic(topic, assignments=[[0]])
    conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
    try:
        size = await _produce(conn, topic, 60)
        await admin.alter_configs(configs)
        leo = cluster.broker(0).partitions[(topic, 0)].log_end_offset
        started = time.monotonic()
        await _reassign(conn, topic, [1])
    finally:
        conn.close()

    def caught_up() -> bool:
        p = cluster.broker(1).partitions.get((topic, 0))
        return p is not None and p.log_end_offset >= leo
    await wait_for_async(caught_up, "broker 1 to catch up", timeout=60, interval=0.01)
    return size, time.monotonic() - started


def _lists(topic: str) -> dict[ConfigResource, dict[str, str | None]]:
    """As ``kafka-reassign-partitions --throttle`` sets them for a move from 0 to 1."""
    return {ConfigResource(TOPIC, topic): {LEADER_LIST: "0:0", FOLLOWER_LIST: "0:1"}}


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_throttled_reassignment_moves_no_more_than_the_rate(side: str) -> None:
    rate = 40_000
    node = "0" if side == "leader" else "1"

    async def main() -> None:
        async with Cluster(brokers=2, config={"replica.fetch.max.bytes": FETCH}) as cluster, \
                Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            configs = _lists("slow")
            configs[ConfigResource(BROKER, node)] = {f"{side}.replication.throttled.rate":
                                                     str(rate)}
            size, took = await _move(cluster, admin, "slow", configs)
            assert size > 5 * rate
            assert took >= (size - FETCH - rate) / rate, (size, took)
            quota = getattr(cluster.broker(int(node)).replication_quotas, side)
            assert quota.throttled > 0
            # the other side of the move was not held back
            other = cluster.broker(1 - int(node)).replication_quotas
            assert getattr(other, "follower" if side == "leader" else "leader").throttled == 0

            # the same move, with the rate but without the lists: not throttled at all
            before = quota.throttled
            await _move(cluster, admin, "free", {})
            assert quota.throttled == before
    asyncio.run(main())


def test_setting_the_rate_back_to_default_removes_the_throttle() -> None:
    async def main() -> None:
        async with Cluster(brokers=2, config={"replica.fetch.max.bytes": FETCH}) as cluster, \
                Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            # 240 KB at 2 KB/s: two minutes if the throttle stayed
            configs = _lists("slow")
            configs[ConfigResource(BROKER, "")] = {LEADER_RATE: "2000"}
            quota = cluster.broker(0).replication_quotas.leader
            move = asyncio.create_task(_move(cluster, admin, "slow", configs))
            await wait_for_async(lambda: quota.throttled > 0, "the leader to throttle")
            assert not move.done()
            await admin.alter_configs({ConfigResource(BROKER, ""): {LEADER_RATE: None}})
            held = quota.throttled
            size, took = await move
            assert took < size / 2000 / 2
            assert quota.throttled == held      # never held back after the delete
    asyncio.run(main())


def test_in_sync_replicas_are_not_throttled_but_counted() -> None:
    async def main() -> None:
        async with Cluster(brokers=2, config={"replica.fetch.max.bytes": FETCH}) as cluster, \
                Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            cluster.create_topic("synced", assignments=[[0, 1]])
            await admin.alter_configs({
                ConfigResource(TOPIC, "synced"): {LEADER_LIST: "*", FOLLOWER_LIST: "*"},
                ConfigResource(BROKER, ""): {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}})
            leader, follower = (cluster.broker(n).replication_quotas for n in (0, 1))
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                # acks=all: each produce waits for the follower; 200 KB at 1 KB/s would
                # take minutes if the in-sync follower were throttled
                await _produce(conn, "synced", 50, acks=-1)
            finally:
                conn.close()
            assert leader.leader.throttled == 0 and follower.follower.throttled == 0
            # both sides counted the bytes all the same (Kafka records in-sync traffic)
            assert leader.leader.measure() > 1000 and follower.follower.measure() > 1000
    asyncio.run(main())


def test_describe_shows_the_rates_and_lists_with_their_sources() -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster, \
                Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            cluster.create_topic("t", partitions=2, replication_factor=2)
            b0, dflt, topic = ConfigResource(BROKER, "0"), ConfigResource(BROKER, ""), \
                ConfigResource(TOPIC, "t")
            got = await admin.describe_config_entries([b0, topic])
            assert LEADER_RATE not in {e.name for e in got[b0]}    # only when set, as Kafka
            lists = {e.name: (e.value, e.source) for e in got[topic]}
            assert lists[LEADER_LIST] == ("", "DEFAULT_CONFIG")
            assert lists[FOLLOWER_LIST] == ("", "DEFAULT_CONFIG")

            await admin.alter_configs({b0: {LEADER_RATE: "1000000"},
                                       dflt: {FOLLOWER_RATE: "2000000"},
                                       topic: {LEADER_LIST: "0:0,1:1", FOLLOWER_LIST: "*"}})
            got = await admin.describe_config_entries([b0, dflt, topic])
            entries = {e.name: e for e in got[b0]}
            e = entries[LEADER_RATE]
            assert (e.value, e.source, e.read_only, e.sensitive) == (
                "1000000", "DYNAMIC_BROKER_CONFIG", False, False)
            e = entries[FOLLOWER_RATE]
            assert (e.value, e.source) == ("2000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
            assert [(e.name, e.value, e.source) for e in got[dflt]] == [
                (FOLLOWER_RATE, "2000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")]
            typed = {c.name: c.config_type for c in _describe_broker(
                cluster.broker(0), "0", None, False)}
            assert typed[LEADER_RATE] == typed[FOLLOWER_RATE] == 5      # LONG
            lists = {e.name: (e.value, e.source) for e in got[topic]}
            assert lists[LEADER_LIST] == ("0:0,1:1", "DYNAMIC_TOPIC_CONFIG")
            assert lists[FOLLOWER_LIST] == ("*", "DYNAMIC_TOPIC_CONFIG")
            quotas = cluster.broker(0).replication_quotas
            assert quotas.leader.bound() == 1_000_000 and quotas.follower.bound() == 2_000_000
            assert quotas.leader.is_throttled("t", 0) and not quotas.leader.is_throttled("t", 1)
            assert cluster.broker(1).replication_quotas.leader.bound() == 2**63 - 1

            with pytest.raises(errors.InvalidRequestError, match="Value must be at least 0"):
                await admin.alter_configs({b0: {LEADER_RATE: "-1"}})
            with pytest.raises(errors.InvalidRequestError, match="Not a number of type LONG"):
                await admin.alter_configs({dflt: {FOLLOWER_RATE: "fast"}})
            with pytest.raises(errors.InvalidConfigError):
                await admin.alter_configs({topic: {LEADER_LIST: "0-0"}})
    asyncio.run(main())
