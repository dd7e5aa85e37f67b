"""Produce one record and tell, step by step, what kaflite's producer did.

The steps are the client's own: the partition (murmur2 of the key, as Kafka's
default partitioner, checked against where the record landed), the leader from
the producer's metadata, the connection to it (already open, or opened now: the
producer's ``connect`` event and the ApiVersions it negotiated), the Produce
request's version, and the offset and latency the response gave. Every event
the producer logged during the call (a metadata refresh, an error, a retry) is
a step too, at its time.
"""

from __future__ import annotations

import time

from kaflite.client import Producer
from kaflite.client.pool import DATA
from kaflite.console.backend import ClientBackend
from kaflite.console.web import ApiError, Json
from kaflite.protocol.hashing import murmur2, to_positive

__all__ = ["produce_traced"]

PRODUCE = 0


class _Steps:
    def __init__(self) -> None:
        self.t0 = time.time()
        self.rows: list[Json] = []

    def add(self, step: str, detail: str, at: float | None = None) -> None:
        t = (at if at is not None else time.time()) - self.t0
        self.rows.append({"t_ms": round(max(t, 0.0) * 1000, 3), "step": step, "detail": detail})


async def produce_traced(backend: ClientBackend, topic: str, key: bytes | None,
                         value: bytes | None, headers: list[tuple[str, bytes | None]],
                         partition: int | None) -> Json:
    steps = _Steps()
    producer = await backend.producer()
    seen = len(producer.events())
    if not producer._started:
        await producer.start()
    meta = await producer.metadata.ensure_topic(topic, 10.0)
    count = len(meta.partitions)
    if partition is not None and not 0 <= partition < count:
        raise ApiError(400, f"topic {topic!r} has partitions 0..{count - 1}; "
                            f"no partition {partition}")
    seen = _events_since(producer, seen, steps)
    expected: int | None = partition
    if partition is not None:
        steps.add("partition", f"partition {partition}, as given")
    elif key is not None:
        expected = to_positive(murmur2(key)) % count
        steps.add("partition", f"murmur2(key) = {murmur2(key) & 0xFFFFFFFF:#010x}; "
                               f"toPositive(hash) % {count} partitions = {expected}")
    leader_before = None
    if expected is not None:
        leader_before = _leader_step(producer, topic, expected, steps)
    conn_before = (producer.pool.connection_if_open(leader_before, DATA)
                   if leader_before is not None else None)
    if conn_before is not None:
        stats = conn_before.stats
        steps.add("connection", f"using the open connection to broker {leader_before} "
                                f"({conn_before.local_address} → {conn_before.address}), "
                                f"{stats.requests} requests so far")
    open_before = {id(c) for _, channel, c in producer.pool.open_connections()
                   if channel == DATA}
    started = time.monotonic()
    sent_at = time.time()
    acks = producer.config["acks"]
    try:
        md = await producer.send(topic, value, key=key, partition=partition,
                                 headers=headers or None)
    except Exception as exc:
        _events_since(producer, seen, steps)
        steps.add("error", f"{type(exc).__name__}: {exc}")
        raise
    latency_ms = (time.monotonic() - started) * 1000
    connected_at = [e.timestamp for e in producer.events()[seen:] if e.kind == "connect"]
    _events_since(producer, seen, steps)
    if expected is None:      # chosen when the record was appended, at the send
        steps.add("partition", f"no key: the sticky partitioner chose partition "
                               f"{md.partition}", at=sent_at)
        leader_before = _leader_step(producer, topic, md.partition, steps, at=sent_at)
    elif md.partition != expected:
        steps.add("partition", f"the record landed in partition {md.partition}, "
                               f"not {expected}")
    conn = (producer.pool.connection_if_open(leader_before, DATA)
            if leader_before is not None else None)
    if conn is not None and conn_before is None and id(conn) in open_before:
        steps.add("connection", f"using the open connection to broker {leader_before} "
                                f"({conn.local_address} → {conn.address})", at=sent_at)
    elif conn is not None and conn_before is None:
        versions = conn.api_versions
        steps.add("connection", f"opened a connection to broker {leader_before} "
                                f"({conn.local_address} → {conn.address}); ApiVersions "
                                f"first: the broker offers {len(versions)} APIs",
                  at=conn.stats.opened_at)
    # the request goes once its connection is ready (ApiVersions done: the connect event)
    produce_at = max([sent_at, *connected_at]) + 1e-6
    if conn is not None:
        steps.add("produce", f"Produce v{conn.version_for(PRODUCE)} to broker "
                             f"{leader_before}: 1 record, acks={acks}", at=produce_at)
    else:
        steps.add("produce", f"Produce to the leader of {topic}-{md.partition}, "
                             f"acks={acks}", at=produce_at)
    steps.add("response", f"offset {md.offset} in {topic}-{md.partition} after "
                          f"{latency_ms:.1f} ms")
    steps.rows.sort(key=lambda r: float(str(r["t_ms"])))
    return {"topic": topic, "partition": md.partition, "offset": md.offset,
            "timestamp_ms": md.timestamp, "latency_ms": round(latency_ms, 3),
            "steps": steps.rows}


def _leader_step(producer: Producer[bytes, bytes | None], topic: str, partition: int,
                 steps: _Steps, at: float | None = None) -> int | None:
    found = producer.metadata.leader(topic, partition)
    if found is None or found.leader < 0:
        steps.add("metadata", f"no leader known for {topic}-{partition} yet", at=at)
        return None
    address = producer.pool.brokers.get(found.leader)
    where = f" at {address.host}:{address.port}" if address is not None else ""
    steps.add("metadata", f"leader of {topic}-{partition} is broker {found.leader}{where} "
                          f"(leader epoch {found.leader_epoch}), from the producer's metadata",
              at=at)
    return found.leader


def _events_since(producer: Producer[bytes, bytes | None], seen: int, steps: _Steps) -> int:
    events = producer.events()
    for e in events[seen:]:
        cause = f" ({e.cause})" if e.cause else ""
        steps.add(e.kind, e.message + cause, at=e.timestamp)
    return len(events)
