"""kaflite's idempotent producer (acks=all) and its consumer, against each target: what
is acknowledged is read back exactly (keys, values, headers, order, offsets), in
every compression codec, so the broker accepted kaflite's batches as written."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.client import Producer, RecordMetadata
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, read_to_end, replicas, run, uid
from tests.interop.conftest import matrix_fixture

pytestmark = pytest.mark.interop

# kaflite, Apache Kafka, Tansu and kfake (tests/interop/conftest.py)
target = matrix_fixture()

PARTITIONS = 3
RECORDS = 300


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_acks_all_reads_back_exactly(target: ClusterUnderTest,
                                               compression: str) -> None:
    topic = uid(f"produce-{compression}")
    servers = target.bootstrap_servers

    async def main() -> tuple[list[RecordMetadata], list[tuple[int, int, bytes | None,
                                                                bytes | None, object]]]:
        await create_topic(servers, topic, PARTITIONS, replicas(target))
        async with Producer(bootstrap_servers=servers, enable_idempotence=True, acks="all",
                            compression_type=compression, linger_ms=5) as p:
            sent = await asyncio.gather(*[
                p.send(topic, f"value-{i}".encode(), key=f"key-{i % 17}".encode(),
                       headers=[("i", str(i).encode())])
                for i in range(RECORDS)])
        got = await read_to_end(servers, topic, PARTITIONS, want=RECORDS)
        return list(sent), [(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in got]

    sent, got = run(main())
    # every acknowledgement names a distinct offset, contiguous from 0 in each partition
    by_partition: dict[int, list[int]] = {}
    for m in sent:
        by_partition.setdefault(m.partition, []).append(m.offset)
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    assert len(by_partition) > 1, "17 keys should spread over the partitions"
    # what was acknowledged is what is there: same place, same content, nothing else
    want = {(m.partition, m.offset): (f"key-{i % 17}".encode(), f"value-{i}".encode(),
                                      (("i", str(i).encode()),))
            for i, m in enumerate(sent)}
    assert len(got) == RECORDS
    assert {(p, o): (k, v, h) for p, o, k, v, h in got} == want
    # a key always lands in one partition, in the order it was sent
    for key in {k for _, _, k, _, _ in got}:
        seen = [(p, int(v.split(b"-")[1])) for p, _, k, v, _ in sorted(got) if k == key
                and v is not None]
        assert len({p for p, _ in seen}) == 1
        assert [i for _, i in seen] == sorted(i for _, i in seen)

