"""The message browser: records of a topic from an offset, a timestamp, the start or
the end, read by a short-lived kaflite ``Consumer`` (no group) with the isolation
level asked for, optionally filtered by a case-insensitive search on the server.

Each call is bounded: at most ``limit`` records come back, at most ``max_scan``
records are read, and it stops once every partition reached the end offset it
had when the call began (or after ``deadline_s``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from kaflite.client import Consumer, TopicPartition
from kaflite.console.backend import ClientBackend
from kaflite.console.render import render_bytes, search_hit
from kaflite.console.web import Json

__all__ = ["Browse", "browse"]

ISOLATIONS = ("read_uncommitted", "read_committed")


@dataclass(frozen=True)
class Browse:
    topic: str
    partitions: list[int] | None = None    # None: every partition
    start: str = "latest"                  # "earliest" | "latest" | "offset" | "timestamp"
    value: int | None = None               # the offset (negative: from the end) or timestamp
    limit: int = 50
    isolation: str = "read_uncommitted"
    search: str | None = None
    max_scan: int = 10_000
    deadline_s: float = 10.0


async def browse(backend: ClientBackend, q: Browse) -> Json:
    count = await backend.partition_count(q.topic)
    wanted = sorted(set(q.partitions)) if q.partitions is not None else list(range(count))
    bad = [p for p in wanted if not 0 <= p < count]
    if bad:
        from kaflite.console.web import ApiError

        raise ApiError(400, f"topic {q.topic!r} has partitions 0..{count - 1}; "
                            f"no partition {bad[0]}")
    tps = [TopicPartition(q.topic, p) for p in wanted]
    consumer: Consumer[bytes, bytes] = Consumer(backend.config(
        "browser", **{"isolation.level": q.isolation, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"}))
    try:
        await consumer.start()
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        begin = await _start_offsets(consumer, q, tps, starts, ends)
        todo = {tp for tp in tps if begin[tp] < ends.get(tp, 0)}
        records: list[Json] = []
        scanned = 0
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, begin[tp])
        positions = dict(begin)
        needle = q.search.lower().encode() if q.search else None
        deadline = time.monotonic() + q.deadline_s
        while todo and scanned < q.max_scan and time.monotonic() < deadline:
            got = await consumer.getmany(timeout_ms=200, max_records=500)
            for tp, batch in got.items():
                end = ends.get(tp, 0)
                for r in batch:
                    if r.offset >= end:
                        todo.discard(tp)
                        break
                    positions[tp] = r.offset + 1
                    scanned += 1
                    if needle is not None and not search_hit(needle, r.key, r.value,
                                                             list(r.headers)):
                        continue
                    records.append(_row(r.partition, r.offset, r.timestamp, r.key, r.value,
                                        list(r.headers)))
                if positions.get(tp, 0) >= end:
                    todo.discard(tp)
            for tp in list(todo):        # transactions' markers: positions pass the end
                if tp in consumer.assignment() and await consumer.position(tp) >= ends[tp]:
                    todo.discard(tp)
            if needle is None and len(records) >= q.limit * len(tps):
                break
        records.sort(key=lambda r: (int(str(r["timestamp_ms"])), int(str(r["partition"])),
                                    int(str(r["offset"]))))
        records = records[-q.limit:] if q.start == "latest" else records[:q.limit]
        return {"topic": q.topic, "isolation": q.isolation, "records": records,
                "next_offsets": {str(tp.partition): positions[tp] for tp in tps},
                "start_offsets": {str(tp.partition): starts.get(tp) for tp in tps},
                "end_offsets": {str(tp.partition): ends.get(tp) for tp in tps},
                "scanned": scanned}
    finally:
        await asyncio.shield(consumer.close())


async def _start_offsets(consumer: Consumer[bytes, bytes], q: Browse, tps: list[TopicPartition],
                         starts: dict[TopicPartition, int], ends: dict[TopicPartition, int]
                         ) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    if q.start == "timestamp" and q.value is not None:
        found = await consumer.offsets_for_times({tp: q.value for tp in tps})
        for tp in tps:
            hit = found.get(tp)
            out[tp] = hit.offset if hit is not None else ends.get(tp, 0)
        return out
    for tp in tps:
        start, end = starts.get(tp, 0), ends.get(tp, 0)
        if q.start == "earliest":
            want = start
        elif q.start == "offset" and q.value is not None:
            want = end + q.value if q.value < 0 else q.value
        else:                                        # latest: the last ``limit`` records
            want = end - q.limit
        out[tp] = min(max(want, start), end)
    return out


def _row(partition: int, offset: int, timestamp: int, key: bytes | None,
         value: bytes | None, headers: list[tuple[str, bytes | None]]) -> Json:
    return {"partition": partition, "offset": offset, "timestamp_ms": timestamp,
            "key": render_bytes(key), "value": render_bytes(value),
            "headers": [{"key": k, "value": render_bytes(v)} for k, v in headers]}
