"""kaflite's ShareConsumer (async and sync) in share groups on a kaflite cluster.

Four consumers share a 2-partition topic and the work spreads over all four;
every record is processed and, accepted, never delivered again. A released
record is delivered again (delivery count 2); a rejected one, or one released
until the delivery-count limit, is archived and never delivered again. A
renewed lock keeps a record from the other members past the lock duration.
Explicit acknowledgement refuses a poll while records are unacknowledged.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from kaflite.client import AcknowledgeType, ShareConsumer, ShareRecord
from kaflite.client import sync as ksync
from kaflite.client.consumer import IllegalStateError
from kaflite.cluster import Cluster
from kaflite.config import ConfigError
from tests.client.share.conftest import (
    COUNT_LIMIT,
    LOCK_MS,
    create_topic,
    fetching,
    join,
    names,
    produce,
)

RECORDS = 400


def consumer(servers: str, group: str, **extra: object) -> ShareConsumer:
    # record_limit (KIP-1206): a ShareFetch acquires at most max.poll.records records,
    # so the work spreads and nothing waits in a buffer past its short lock
    return ShareConsumer({"bootstrap.servers": servers, "group.id": group,
                          "max.poll.records": 5, "share.acquire.mode": "record_limit", **extra})


async def drain(consumers: list[ShareConsumer], want: set[bytes], seen: list[list[bytes]],
                timeout: float = 20.0) -> None:
    """Poll all until ``want`` has been seen (each consumer's values in ``seen``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not want <= {v for s in seen for v in s}:
        got = await asyncio.gather(*(c.poll(200) for c in consumers))
        for i, records in enumerate(got):
            seen[i].extend(r.value for r in records if r.value is not None)
            if records:
                await asyncio.sleep(0.01)   # some work: the others get their turn


def test_four_consumers_share_the_work_and_accept_everything(cluster: Cluster) -> None:
    asyncio.run(_four_consumers_share_the_work_and_accept_everything(cluster.bootstrap_servers))


async def _four_consumers_share_the_work_and_accept_everything(servers: str) -> None:
    topic, group = names()
    await create_topic(servers, topic)
    consumers = [consumer(servers, group) for _ in range(4)]
    try:
        for c in consumers:
            await c.start()
            c.subscribe([topic])
        await join(consumers)
        values = set(await produce(servers, topic, RECORDS))
        seen: list[list[bytes]] = [[] for _ in consumers]
        await drain(consumers, values, seen)
        assert {v for s in seen for v in s} == values
        assert all(seen), [len(s) for s in seen]   # the work spread over all four
        # accepted implicitly by the next polls: nothing comes back after the locks
        # would have expired
        again: list[list[bytes]] = [[] for _ in consumers]
        deadline = time.monotonic() + 2 * LOCK_MS / 1000
        while time.monotonic() < deadline:
            for i, records in enumerate(await asyncio.gather(*(c.poll(200) for c in consumers))):
                again[i].extend(r.value for r in records if r.value is not None)
        assert not any(again)
        roles = [role for c in consumers for info in c.connections() for role in info.roles]
        assert any(r.startswith("share-coordinator") for r in roles)
        assert any(r.startswith("share-partition leader for") for r in roles)
    finally:
        for c in consumers:
            await c.close()


def test_four_sync_consumers_share_the_work(cluster: Cluster) -> None:
    servers = cluster.bootstrap_servers
    topic, group = names()
    asyncio.run(create_topic(servers, topic))
    consumers = [ksync.ShareConsumer({"bootstrap.servers": servers, "group.id": group,
                                      "max.poll.records": 5,
                                      "share.acquire.mode": "record_limit"})
                 for _ in range(4)]
    seen: list[list[bytes]] = [[] for _ in consumers]
    ready = threading.Barrier(5)
    stop = threading.Event()
    failures: list[BaseException] = []

    def run(i: int) -> None:
        c = consumers[i]
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + 15
            while not fetching(c._async) and time.monotonic() < deadline:
                assert not c.poll(100)
            ready.wait(timeout=20)
            while not stop.is_set():
                records = c.poll(100)
                seen[i].extend(r.value for r in records if r.value is not None)
                if records:
                    time.sleep(0.01)
        except BaseException as exc:
            failures.append(exc)
            ready.abort()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(4)]
    try:
        for t in threads:
            t.start()
        ready.wait(timeout=20)
        values = set(asyncio.run(produce(servers, topic, RECORDS)))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not values <= {v for s in seen for v in s}:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        for c in consumers:
            c.close()
    assert not failures, failures
    assert {v for s in seen for v in s} == values
    assert all(seen), [len(s) for s in seen]


def test_released_record_is_delivered_again(cluster: Cluster) -> None:
    asyncio.run(_released_record_is_delivered_again(cluster.bootstrap_servers))


async def _released_record_is_delivered_again(servers: str) -> None:
    topic, group = names()
    await create_topic(servers, topic, partitions=1)
    c = consumer(servers, group, **{"share.acknowledgement.mode": "explicit"})
    try:
        await c.start()
        c.subscribe([topic])
        await join([c], partitions=1)
        await produce(servers, topic, 3, partitions=1)
        first: list[ShareRecord[bytes, bytes]] = []
        deadline = time.monotonic() + 10
        while len(first) < 3 and time.monotonic() < deadline:
            got = await c.poll(200)
            for r in got:
                c.acknowledge(r, AcknowledgeType.RELEASE if r.value == b"0"
                              else AcknowledgeType.ACCEPT)
            first.extend(got)
        assert [r.value for r in first] == [b"0", b"1", b"2"]
        assert all(r.delivery_count == 1 for r in first)
        results = await c.commit_sync()
        assert results and all(e is None for e in results.values()), results
        again = []
        deadline = time.monotonic() + 10
        while not again and time.monotonic() < deadline:
            again = await c.poll(200)
        assert [(r.offset, r.value, r.delivery_count) for r in again] == \
            [(first[0].offset, b"0", 2)]
        # explicit mode: the next poll refuses while a record is unacknowledged ...
        with pytest.raises(IllegalStateError, match="must be acknowledged"):
            await c.poll(100)
        c.acknowledge(again[0])
        # ... and a record that is not from the last poll cannot be acknowledged
        with pytest.raises(IllegalStateError):
            c.acknowledge(first[1])
        assert await c.poll(300) == []
    finally:
        await c.close()


def test_rejected_and_over_the_limit_are_archived(cluster: Cluster) -> None:
    asyncio.run(_rejected_and_over_the_limit_are_archived(cluster.bootstrap_servers))


async def _rejected_and_over_the_limit_are_archived(servers: str) -> None:
    topic, group = names()
    await create_topic(servers, topic, partitions=1)
    c = consumer(servers, group, **{"share.acknowledgement.mode": "explicit"})
    deliveries: dict[bytes, list[int]] = {}
    try:
        await c.start()
        c.subscribe([topic])
        await join([c], partitions=1)
        await produce(servers, topic, 3, partitions=1)
        quiet_since = time.monotonic()
        deadline = time.monotonic() + 20
        # until nothing came for longer than a lock lasts
        while time.monotonic() - quiet_since < 2 * LOCK_MS / 1000 and \
                time.monotonic() < deadline:
            got = await c.poll(200)
            for r in got:
                assert r.value is not None
                deliveries.setdefault(r.value, []).append(r.delivery_count)
                kind = {b"0": AcknowledgeType.REJECT, b"1": AcknowledgeType.RELEASE}.get(
                    r.value, AcknowledgeType.ACCEPT)
                c.acknowledge(r, kind)
            if got:
                quiet_since = time.monotonic()
                await c.commit_sync()
    finally:
        await c.close()
    assert deliveries[b"0"] == [1]                                 # rejected: archived
    assert deliveries[b"1"] == list(range(1, COUNT_LIMIT + 1))    # released up to the limit
    assert deliveries[b"2"] == [1]                                 # accepted


def test_renewed_lock_outlasts_the_lock_duration(cluster: Cluster) -> None:
    asyncio.run(_renewed_lock_outlasts_the_lock_duration(cluster.bootstrap_servers))


async def _renewed_lock_outlasts_the_lock_duration(servers: str) -> None:
    topic, group = names()
    await create_topic(servers, topic, partitions=1)
    holder = consumer(servers, group, **{"share.acknowledgement.mode": "explicit"})
    other = consumer(servers, group)
    stolen: list[bytes] = []
    try:
        await holder.start()
        holder.subscribe([topic])
        await join([holder], partitions=1)
        await produce(servers, topic, 1, partitions=1)
        held: list[ShareRecord[bytes, bytes]] = []
        deadline = time.monotonic() + 10
        while not held and time.monotonic() < deadline:
            held = await holder.poll(100)
        record = held[0]
        # the lock the broker gave; nothing renews it but the application's RENEW (Java)
        assert holder.acquisition_lock_timeout_ms() == LOCK_MS
        assert other.acquisition_lock_timeout_ms() is None        # nothing fetched yet
        await other.start()       # a second member of the partition, polling all along
        other.subscribe([topic])
        # three half-lock waits: past the lock duration, renewed every time
        for _ in range(3):
            until = time.monotonic() + LOCK_MS / 2000
            while time.monotonic() < until:
                stolen.extend(r.value for r in await other.poll(100) if r.value is not None)
            holder.acknowledge(record, AcknowledgeType.RENEW)
            results = await holder.commit_sync()
            assert all(e is None for e in results.values()), results
        assert stolen == []
        # a renewed record counts as acknowledged for the next poll: the member keeps it
        assert await holder.poll(100) == []
        holder.acknowledge(record, AcknowledgeType.ACCEPT)
        await holder.commit_sync()
        until = time.monotonic() + 1.5 * LOCK_MS / 1000
        while time.monotonic() < until:
            stolen.extend(r.value for r in await other.poll(100) if r.value is not None)
        assert stolen == []
    finally:
        await holder.close()
        await other.close()


def test_share_consumer_configuration_is_checked() -> None:
    base = {"bootstrap.servers": "localhost:9092", "group.id": "g"}
    with pytest.raises(ConfigError, match=r"enable\.auto\.commit"):
        ShareConsumer({**base, "enable.auto.commit": True})
    with pytest.raises(ConfigError, match=r"share\.acknowledgement\.mode"):
        ShareConsumer({**base, "share.acknowledgement.mode": "sometimes"})
    with pytest.raises(ConfigError, match=r"group\.id"):
        ShareConsumer({"bootstrap.servers": "localhost:9092"})
    c = ShareConsumer(base, share_acknowledgement_mode="explicit")
    assert c.acknowledgement_mode == "explicit"
    implicit = ShareConsumer(base)
    record: ShareRecord[bytes, bytes] = ShareRecord("t", 0, 0, 0, None, b"v")
    with pytest.raises(IllegalStateError, match="explicit"):
        implicit.acknowledge(record)


KILLED_MEMBER = """
import asyncio, json, sys
from kaflite.client import ShareConsumer
from tests.client.share.conftest import fetching

async def main(servers, topic, group):
    c = ShareConsumer({"bootstrap.servers": servers, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    while not fetching(c):
        await c.poll(100)
    print("ready", flush=True)
    held = []
    while not held:
        held = await c.poll(200)
    print(json.dumps([[r.partition, r.offset] for r in held]), flush=True)
    await asyncio.sleep(60)   # holding the locks until killed

asyncio.run(main(*sys.argv[1:4]))
"""


def test_killed_member_records_are_delivered_again_after_the_lock(cluster: Cluster) -> None:
    asyncio.run(_killed_member(cluster.bootstrap_servers))


async def _killed_member(servers: str) -> None:
    import json
    import os
    import signal
    import sys

    topic, group = names()
    await create_topic(servers, topic)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KILLED_MEMBER, servers, topic, group,
        stdout=asyncio.subprocess.PIPE, cwd=os.getcwd())
    survivor = consumer(servers, group)
    try:
        assert child.stdout is not None
        async with asyncio.timeout(30):
            assert (await child.stdout.readline()).strip() == b"ready"
            values = set(await produce(servers, topic, 20))
            held = {tuple(x) for x in json.loads(await child.stdout.readline())}
        assert held
        child.send_signal(signal.SIGKILL)   # no close: its locks stay until they expire
        await child.wait()
        await survivor.start()
        survivor.subscribe([topic])
        again: dict[tuple[int, int], int] = {}
        seen: set[bytes] = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (held <= set(again) and seen == values):
            for r in await survivor.poll(200):
                again[(r.partition, r.offset)] = r.delivery_count
                assert r.value is not None
                seen.add(r.value)
        assert held <= set(again)
        assert all(again[k] == 2 for k in held)   # delivered once to the killed member
        assert seen == values
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        await survivor.close()


def test_no_long_poll_while_the_application_holds_records(cluster: Cluster) -> None:
    asyncio.run(_no_long_poll(cluster.bootstrap_servers))


async def _no_long_poll(servers: str) -> None:
    """A ShareFetch sent while the application holds records of that leader does not
    wait on the broker (it could park behind the records the application is about to
    acknowledge); once they are acknowledged, fetches wait again."""
    from kaflite.protocol.messages import ShareFetchRequest

    topic, group = names()
    await create_topic(servers, topic, partitions=1)
    c = consumer(servers, group)
    sent: list[tuple[int, int]] = []   # (MaxWaitMs, acknowledged offsets) of each ShareFetch
    try:
        await c.start()
        c.subscribe([topic])
        await join([c], partitions=1)
        leader = c.metadata.leader(topic, 0)
        assert leader is not None
        conn = await c.pool.get(leader.leader)
        request = conn.request

        async def spy(body: Any, **kwargs: Any) -> Any:
            if isinstance(body, ShareFetchRequest):
                sent.append((body.max_wait_ms, sum(
                    b.last_offset - b.first_offset + 1 for t in body.topics
                    for p in t.partitions for b in p.acknowledgement_batches)))
            return await request(body, **kwargs)

        setattr(conn, "request", spy)   # noqa: B010 (an instance attribute, on purpose)
        await produce(servers, topic, 3, partitions=1)
        got: list[ShareRecord[bytes, bytes]] = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            got = await c.poll(200)
        assert got
        mark = len(sent)
        await asyncio.sleep(0.3)          # the application holds the records meanwhile
        assert sent[mark:] and all(wait == 0 for wait, _ in sent[mark:]), sent[mark:]
        mark = len(sent)
        assert await c.poll(600) == []    # accepts them: the next ShareFetch carries that
        assert any(acked == len(got) for _, acked in sent[mark:]), sent[mark:]
        assert any(wait == c.config.int("fetch.max.wait.ms") for wait, _ in sent[mark:])
    finally:
        await c.close()
