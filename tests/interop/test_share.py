"""kaflite's share consumer (KIP-932) against each target: two members of one share
group read a topic together; each record is accepted exactly once, a released record
is delivered again with its delivery count raised, a rejected one never again, and
the group is listed as a share group. Apache Kafka 4.4 enables share groups at format
time (share.version 2), so the broker needs no setting for it; 4.0 does not serve them,
and the consumer says so."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from kaflite.client import AcknowledgeType, Admin, ConfigResource, Producer, ShareConsumer
from kaflite.protocol import errors
from kaflite.testing import ApacheKafka, ClusterUnderTest
from tests.interop._clients import create_topic, replicas, run, uid
from tests.interop.conftest import ONE_BROKER, matrix_fixture

pytestmark = pytest.mark.interop

# one broker of kaflite and Apache Kafka, Tansu and kfake (tests/interop/conftest.py)
target1 = matrix_fixture(ONE_BROKER, name="target1")

GROUP_RESOURCE = 32     # ConfigResource type GROUP
RECORDS = 100


def _kafka_before_4_1(target: ClusterUnderTest) -> bool:
    if not isinstance(target, ApacheKafka):
        return False
    major, minor = (int(x) for x in target.version.split(".")[:2])
    return (major, minor) < (4, 1)


def test_two_share_consumers_accept_release_and_reject(target1: ClusterUnderTest) -> None:
    target = target1
    topic, group = uid("share"), uid("share-group")
    servers = target.bootstrap_servers
    if _kafka_before_4_1(target):   # KAFKA_VERSION=4.0.x: share groups are not served
        with pytest.raises(errors.UnsupportedVersionError, match="share groups need"):
            run(refused(servers, topic, group))
        return
    if target.name.startswith("tansu"):
        with pytest.raises(errors.UnsupportedVersionError, match="share groups need"):
            run(refused(servers, topic, group))
        pytest.skip(f"{target.name}: Tansu 0.6 serves no ShareGroupHeartbeat (KIP-932); "
                    "kaflite's share consumer says so at once, as checked")

    async def main() -> tuple[Counter[bytes], list[int], list[int], set[bytes], str]:
        await create_topic(servers, topic, 2, replicas(target))
        async with Admin(bootstrap_servers=servers) as admin:
            # the group reads from the start of the log (the default is its end)
            await admin.alter_configs({ConfigResource(GROUP_RESOURCE, group): {
                "share.auto.offset.reset": "earliest"}})
        async with Producer(bootstrap_servers=servers) as p:
            for i in range(RECORDS):
                p.produce(topic, f"s{i}".encode(), partition=i % 2)
            await p.flush()
        members = [ShareConsumer(bootstrap_servers=servers, group_id=group,
                                 client_id=f"share-m{i}",
                                 share_acknowledgement_mode="explicit") for i in range(2)]
        accepted: Counter[bytes] = Counter()
        released: list[int] = []       # delivery counts of the released record
        redelivered: list[int] = []
        by_member: list[set[bytes]] = [set(), set()]
        try:
            for m in members:
                await m.start()
                m.subscribe([topic])
            deadline = time.monotonic() + 60
            while sum(accepted.values()) < RECORDS - 1 or not redelivered:
                for i, m in enumerate(members):
                    for r in await m.poll(200):
                        value = r.value or b""
                        by_member[i].add(value)
                        if value == b"s7" and not released:
                            released.append(r.delivery_count)
                            m.acknowledge(r, AcknowledgeType.RELEASE)
                        elif value == b"s9":
                            m.acknowledge(r, AcknowledgeType.REJECT)
                        else:
                            if value == b"s7":
                                redelivered.append(r.delivery_count)
                            accepted[value] += 1
                            m.acknowledge(r, AcknowledgeType.ACCEPT)
                    await m.commit_sync()
                assert time.monotonic() < deadline, \
                    f"{sum(accepted.values())} accepted, s7 redelivered {redelivered}"
            # nothing comes back once everything is acknowledged
            for _ in range(5):
                for m in members:
                    for r in await m.poll(100):
                        accepted[r.value or b""] += 1
            async with Admin(bootstrap_servers=servers) as admin:
                listed = {g.group_id: g.type for g in await admin.list_group_listings()}
        finally:
            await asyncio.gather(*(m.close() for m in members), return_exceptions=True)
        return accepted, released, redelivered, by_member[0] | by_member[1], listed[group]

    accepted, released, redelivered, seen, kind = run(main(), timeout=120)
    assert set(accepted) == {f"s{i}".encode() for i in range(RECORDS)} - {b"s9"}
    assert max(accepted.values()) == 1
    assert released == [1] and redelivered == [2]
    assert b"s9" in seen
    assert kind == "share"


async def refused(servers: str, topic: str, group: str) -> None:
    async with ShareConsumer(bootstrap_servers=servers, group_id=group) as c:
        c.subscribe([topic])
        await c.poll(5000)
