"""acks=all on three brokers: a SIGKILL of the partition's leader, while kaflite's
idempotent producer and a consumer keep going, loses no acknowledged record and
writes none twice; the killed broker comes back, catches up into the ISR, and can
lead again (``move_leader``), with every acknowledged record still there."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from kaflite.client import Admin, Consumer, Producer, TopicPartition
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, read_to_end, run, uid

pytestmark = pytest.mark.interop

WAVE = 20


@dataclass
class Writes:
    """What the producer was told: offset per acknowledged value, error per failed one."""

    acked: dict[bytes, int] = field(default_factory=dict)
    failed: dict[bytes, str] = field(default_factory=dict)
    sent: int = 0


async def produce_until(p: Producer, topic: str, writes: Writes, stop: asyncio.Event) -> None:
    """Waves of concurrent sends (so batches are in flight when the leader dies), until
    ``stop`` is set."""
    async def one(value: bytes) -> None:
        try:
            writes.acked[value] = (await p.send(topic, value, partition=0)).offset
        except Exception as exc:   # not acknowledged: allowed to be lost, not to be doubled
            writes.failed[value] = repr(exc)

    while not stop.is_set():
        values = [f"r{writes.sent + i}".encode() for i in range(WAVE)]
        writes.sent += WAVE
        await asyncio.gather(*(one(v) for v in values))


async def consume(servers: str, topic: str, seen: list[tuple[int, bytes]],
                  stop: asyncio.Event) -> None:
    """A consumer reading along from the start while the leader changes."""
    async with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        while not stop.is_set():
            for records in (await c.getmany(timeout_ms=100)).values():
                seen += [(r.offset, r.value or b"") for r in records]


async def wait_for_acks(writes: Writes, count: int, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while len(writes.acked) < count:
        assert time.monotonic() < deadline, \
            f"{what}: {len(writes.acked)} of {count} acked; failures {list(writes.failed.values())[:3]}"
        await asyncio.sleep(0.05)


async def partition_state(admin: Admin, topic: str) -> tuple[int, list[int]]:
    await admin.metadata.refresh("test")
    meta = (await admin.describe_topics([topic]))[topic].partitions[0]
    return meta.leader, sorted(meta.isr)


def test_acks_all_survives_a_leader_kill(target3: ClusterUnderTest) -> None:
    target = target3
    topic = uid("leader-kill")
    servers = target.bootstrap_servers

    async def main() -> tuple[Writes, list[tuple[int, bytes]], list[tuple[int, bytes]], int]:
        await create_topic(servers, topic, 1, 3, {"min.insync.replicas": "2"})
        writes, seen = Writes(), list[tuple[int, bytes]]()
        stop_producing, stop_consuming = asyncio.Event(), asyncio.Event()
        async with Admin(bootstrap_servers=servers) as admin, \
                Producer(bootstrap_servers=servers, acks="all", enable_idempotence=True,
                         linger_ms=2, client_id="leader-kill-producer") as p:
            leader, isr = await partition_state(admin, topic)
            assert isr == sorted(target.node_ids)
            if leader in target.unkillable():     # kfake's controller: lead elsewhere
                leader = await asyncio.to_thread(target.move_leader, topic, 0, None)
                assert (await partition_state(admin, topic))[0] == leader
            tasks = [asyncio.create_task(produce_until(p, topic, writes, stop_producing)),
                     asyncio.create_task(consume(servers, topic, seen, stop_consuming))]
            try:
                await wait_for_acks(writes, 100, "before the kill")
                await asyncio.to_thread(target.kill, leader)
                acked_at_kill = len(writes.acked)
                await wait_for_acks(writes, acked_at_kill + 200, "after the kill")
                new_leader, _ = await partition_state(admin, topic)
                assert new_leader not in (leader, -1)
                await asyncio.to_thread(target.restart, leader)
                deadline = time.monotonic() + 60
                while (await partition_state(admin, topic))[1] != sorted(target.node_ids):
                    assert time.monotonic() < deadline, "the restarted broker never rejoined"
                    await asyncio.sleep(0.2)
                moved = await asyncio.to_thread(target.move_leader, topic, 0, leader)
                assert moved == leader
                await wait_for_acks(writes, len(writes.acked) + 100, "led by the restarted")
                stop_producing.set()
                await tasks[0]
                end = (await admin.list_offsets({TopicPartition(topic, 0): "latest"}))
                high = end[TopicPartition(topic, 0)]
                assert high is not None
                deadline = time.monotonic() + 30
                while not seen or seen[-1][0] < high.offset - 1:
                    assert time.monotonic() < deadline, "the reading consumer fell behind"
                    await asyncio.sleep(0.05)
            finally:
                stop_producing.set()
                stop_consuming.set()
                await asyncio.gather(*tasks, return_exceptions=True)
        final = [(r.offset, r.value or b"") for r in await read_to_end(servers, topic, 1)]
        return writes, seen, final, leader

    writes, seen, final, killed = run(main(), timeout=240)
    assert len(writes.acked) >= 400
    for log in (seen, final):
        values = [v for _, v in log]
        assert len(values) == len(set(values)), "a value was written twice"
        at = dict((v, o) for o, v in log)
        lost = {v: o for v, o in writes.acked.items() if at.get(v) != o}
        assert not lost, f"acknowledged records lost or moved after killing {killed}: {lost}"
