"""How the consumer hands out records: bytes columns, RecordList, fetching ahead.

* ``RecordBatch.columns(copy=True)`` (what the fetcher decodes with) gives
  the same records as the zero-copy decode, as ``bytes``, on the strided fast
  path and off it (keys, headers, nulls, varied lengths);
* ``RecordList`` behaves as a read-only sequence of ``ConsumerRecord``;
* the fetcher runs ahead of the position, and a seek, a pause or a reset
  while data is buffered or in flight never hands out a record twice, skips
  one, or hands out one from before a seek.
"""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.client import Consumer, ConsumerRecord, Producer, RecordList, TopicPartition
from kaflite.cluster import Cluster
from kaflite.protocol.records import RecordBatch, encode_batch


def _as_lists(batch: RecordBatch, copy: bool) -> list[tuple[object, ...]]:
    cols = batch.columns(copy=copy)
    out = []
    for o, t, k, v, h in zip(cols.offsets, cols.timestamps, cols.keys, cols.values, cols.headers,
                             strict=True):
        if copy:
            assert k is None or type(k) is bytes
            assert v is None or type(v) is bytes
            assert all(hv is None or type(hv) is bytes for _, hv in h)
        out.append((o, t, None if k is None else bytes(k), None if v is None else bytes(v),
                    tuple((hk, None if hv is None else bytes(hv)) for hk, hv in h)))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 400), value_len=st.integers(0, 200),
       keyed=st.booleans(), odd=st.sets(st.integers(0, 399), max_size=4),
       with_headers=st.booleans(), nulls=st.booleans())
def test_columns_copy_matches_views(n: int, value_len: int, keyed: bool, odd: set[int],
                                    with_headers: bool, nulls: bool) -> None:
    values: list[bytes | None] = [bytes([i % 251]) * (value_len + (3 if i in odd else 0))
                                  for i in range(n)]
    if nulls:
        values = [None if i in odd else v for i, v in enumerate(values)]
    keys = [f"k{i % 9}".encode() for i in range(n)] if keyed else None
    headers = ([[("h", b"v"), ("n", None)] if i in odd else None for i in range(n)]
               if with_headers else None)
    data = encode_batch(values, keys=keys, headers=headers, base_offset=1000,
                        timestamps=[1_700_000_000_000 + (i // 7) for i in range(n)])
    batch = RecordBatch.from_buffer(memoryview(data))
    assert _as_lists(batch, True) == _as_lists(RecordBatch.from_buffer(memoryview(data)), False)


def test_record_list_is_a_sequence_of_records() -> None:
    seg_a = ("t", 0, [5, 6, 7], [1, 2, 3], [None, b"k", None], [b"a", b"b", b"c"],
             [(), (("h", b"1"),), ()])
    seg_b = ("t", 1, [0, 1], [9, 9], [None, None], [b"d", b"e"], [(), ()])
    records = RecordList([seg_a])
    records.add(seg_b)
    assert len(records) == 5 and records
    assert [r.value for r in records] == [b"a", b"b", b"c", b"d", b"e"]
    first = records[0]
    assert isinstance(first, ConsumerRecord)
    assert first == ConsumerRecord("t", 0, 5, 1, None, b"a", ())
    assert records[1].headers == (("h", b"1"),) and records[1].key == b"k"
    assert records[-1] == ConsumerRecord("t", 1, 1, 9, None, b"e", ())
    assert records[3].partition == 1 and records[3].offset == 0
    assert [r.offset for r in records[1:4]] == [6, 7, 0]
    assert records == list(records) and list(records) == records[:]
    assert [r.value for r in records + [first]][-1] == b"a"  # noqa: RUF005 (__add__)
    both = RecordList.concat([RecordList([seg_b]), RecordList([seg_a])])
    assert [r.value for r in both] == [b"d", b"e", b"a", b"b", b"c"]
    assert not RecordList() and len(RecordList()) == 0 and list(RecordList()) == []
    for bad in (5, -6):
        try:
            records[bad]
        except IndexError:
            pass
        else:
            raise AssertionError(f"index {bad} should be out of range")


def test_fetching_ahead_never_repeats_or_skips(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    tp = TopicPartition(topic, 0)
    n = 3000

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=2000,
                            linger_ms=5) as p:
            for i in range(0, n, 100):   # many small batches
                await p.send_batch(topic, [f"{j:05d}".encode() for j in range(i, i + 100)],
                                   partition=0)
        # Small fetches, so that several are ahead of the position at any time.
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest", max_partition_fetch_bytes=3000,
                            max_poll_records=40) as c:
            c.assign([tp])

            async def take(count: int) -> list[int]:
                got: list[int] = []
                for _ in range(200):
                    got += [r.offset for r in await c.poll(timeout_ms=200)]
                    if len(got) >= count:
                        break
                return got

            got = await take(200)
            assert got == list(range(len(got)))
            await asyncio.sleep(0.2)        # let the fetcher run ahead
            assert c._fetcher.buffered_bytes > 0
            c.seek(tp, 10)                  # back, over data already handed out
            again = await take(100)
            assert again == list(range(10, 10 + len(again)))
            c.seek(tp, 2500)                # forward, past what is buffered
            ahead = await take(100)
            assert ahead == list(range(2500, 2500 + len(ahead)))
            c.seek(tp, 1000)
            c.pause(tp)
            assert len(await c.poll(timeout_ms=300)) == 0
            c.resume(tp)
            rest = await take(n - 1000)
            assert rest == list(range(1000, n))
            assert await c.position(tp) == n
            assert len(await c.poll(timeout_ms=300)) == 0

    asyncio.run(asyncio.wait_for(main(), 60))
