"""A share consumer's buffered records: their acquisition locks, and their sessions.

The broker takes a record's lock when it acquires it: after the ShareFetch arrived and
before it answered. A broker that held the request for longer than a lock lasts (a share-
partition loading its state after a restart, a long poll) acquired the records just
before answering; the consumer hands them out, as Java's does, and drops a record only
once its lock has ended whatever the moment of the acquisition (the answer's arrival plus
the lock duration). What it reports as the lock's end stays the earliest it can be (the
send time plus the lock duration). A record acquired in a share session that has
ended since (its connection lost, the broker forgot the session) was released by the
broker when the session ended: it is dropped from the buffer, not handed out.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from kaflite.client import ShareConsumer
from kaflite.client.consumer._types import TopicPartition
from kaflite.client.share._acks import ShareSession
from kaflite.client.share._fetcher import ShareFetcher
from kaflite.protocol.messages import ShareFetchResponse
from kaflite.protocol.messages import share_fetch_response as sfr
from kaflite.protocol.records import encode_batch

LOCK_MS = 4000
TOPIC_ID = uuid.uuid4()
TP = TopicPartition("t", 0)


def _answer() -> ShareFetchResponse:
    records = encode_batch([b"a", b"b", b"c"])
    part = sfr.PartitionData(partition_index=0, records=records, acquired_records=[
        sfr.AcquiredRecords(first_offset=0, last_offset=2, delivery_count=1)])
    return ShareFetchResponse(acquisition_lock_timeout_ms=LOCK_MS, responses=[
        sfr.ShareFetchableTopicResponse(topic_id=TOPIC_ID, partitions=[part])])


async def _fetcher() -> tuple[ShareConsumer[bytes, bytes], ShareFetcher[bytes, bytes],
                              list[str]]:
    consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
        {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    events: list[str] = []
    fetcher: ShareFetcher[bytes, bytes] = ShareFetcher(
        consumer, "g", lambda: "m", lambda kind, message, cause=None, **_: events.append(message),
        lambda *_: None)
    consumer.metadata.topics_by_id[TOPIC_ID] = TP.topic
    fetcher.assignment.add(TP)
    return consumer, fetcher, events


def test_an_answer_slower_than_a_lock_is_handed_out() -> None:
    async def go() -> None:
        consumer, fetcher, events = await _fetcher()
        sent = time.monotonic() - 10 * LOCK_MS / 1000   # the broker held it 40 s
        assert fetcher._handle_fetch(0, ShareSession(0), _answer(), {TP}, {}, sent)
        out = fetcher.drain(10)
        assert [r.offset for _, r in out] == [0, 1, 2]
        assert all(ends == sent + LOCK_MS / 1000 for ends, _ in out)   # the earliest end
        assert not events
        await consumer.close()
    asyncio.run(go())


def test_a_record_whose_lock_has_surely_ended_is_dropped() -> None:
    async def go() -> None:
        consumer, fetcher, events = await _fetcher()
        assert fetcher._handle_fetch(0, ShareSession(0), _answer(), {TP}, {}, time.monotonic())
        # the application comes back after the lock ran out, however late it started
        fetcher.buffer = type(fetcher.buffer)((e, latest - 2 * LOCK_MS / 1000, node, r)
                                              for e, latest, node, r in fetcher.buffer)
        assert fetcher.drain(10) == []
        assert events == ["dropped 3 buffered records of t-0 (offsets 0-2): their acquisition "
                          "lock ended before the application polled them"]
        assert not fetcher.buffered
        await consumer.close()
    asyncio.run(go())


def test_records_of_a_session_that_ended_are_dropped() -> None:
    async def go() -> None:
        consumer, fetcher, events = await _fetcher()
        session = ShareSession(0)
        assert fetcher._handle_fetch(0, session, _answer(), {TP}, {}, time.monotonic())
        fetcher._lost(0, session, {}, "ShareFetch failed: ConnectionClosed")
        assert fetcher.drain(10) == []
        assert not fetcher.buffered
        assert ("dropped 3 buffered records of t-0 (offsets 0-2): their share session with "
                "broker 0 ended, which released them") in events
        # a record from another leader's session stays
        assert fetcher._handle_fetch(1, ShareSession(1), _answer(), {TP}, {}, time.monotonic())
        fetcher._lost(0, ShareSession(0), {}, "ShareFetch failed: ConnectionClosed")
        assert [r.offset for _, r in fetcher.drain(10)] == [0, 1, 2]
        await consumer.close()
    asyncio.run(go())
