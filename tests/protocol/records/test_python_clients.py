"""Golden checks against two independent implementations: aiokafka and kafka-python.

Both directions: batches they build decode with kaflite to the same records,
and batches kaflite builds decode with them. Every codec, magic 2 and legacy
magic 0/1. kafka-python needs third-party codec libraries for snappy, lz4 and
zstd; where they are missing those cases are skipped (reported, never passed).
"""

from __future__ import annotations

from typing import Any

import pytest

from kaflite.protocol.records import (
    RecordBatch,
    encode_batch,
    encode_message_set,
    iter_legacy_records,
)

aio_default = pytest.importorskip("aiokafka.record.default_records")
aio_legacy = pytest.importorskip("aiokafka.record.legacy_records")
aio_codec = pytest.importorskip("aiokafka.codec")
kp_default = pytest.importorskip("kafka.record.default_records")
kp_legacy = pytest.importorskip("kafka.record.legacy_records")
kp_codec = pytest.importorskip("kafka.codec")

CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
N = 60


def _sample() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
    out = []
    for i in range(N):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i == 13 else (b"value %d " % i) * (i % 9)
        headers = [(f"h{j}", b"x" * j) for j in range(i % 3)]
        out.append((key, value, headers, 1_700_000_000_000 + i * 3))
    return out


def _need(lib: Any, codec: int, magic: int = 2) -> None:
    if codec == 3 and magic == 0 and lib.__name__.startswith("kafka"):
        pytest.importorskip("xxhash", reason="kafka-python needs xxhash for magic-0 LZ4")
    if codec and not getattr(lib, f"has_{CODEC_NAMES[codec]}")():
        pytest.skip(f"{lib.__name__} has no {CODEC_NAMES[codec]} codec library installed")


def _b(v: memoryview | bytes | None) -> bytes | None:
    return None if v is None else bytes(v)


PEERS = [("aiokafka", aio_default, aio_codec), ("kafka-python", kp_default, kp_codec)]
CODECS = [0, 1, 2, 3, 4]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p[0])
def test_peer_v2_batch_decodes_in_kaflite(peer: tuple[str, Any, Any], codec: int) -> None:
    _, mod, codec_mod = peer
    _need(codec_mod, codec)
    builder = mod.DefaultRecordBatchBuilder(2, codec, 0, 4242, 3, 17, 2**30)
    sample = _sample()
    for i, (key, value, headers, ts) in enumerate(sample):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    data = bytes(builder.build())
    batch = RecordBatch.from_buffer(data)
    assert batch.crc_ok()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 3, 17)
    assert batch.compression == codec
    cols = batch.columns()
    assert cols.offsets == list(range(N))
    assert cols.timestamps == [s[3] for s in sample]
    assert [_b(k) for k in cols.keys] == [s[0] for s in sample]
    assert [_b(v) for v in cols.values] == [s[1] for s in sample]
    assert [[(k, _b(v)) for k, v in h] for h in cols.headers] == [s[2] for s in sample]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p[0])
def test_kaflite_v2_batch_decodes_in_peer(peer: tuple[str, Any, Any], codec: int) -> None:
    _, mod, codec_mod = peer
    _need(codec_mod, codec)
    sample = _sample()
    data = encode_batch(
        [s[1] for s in sample],
        keys=[s[0] for s in sample],
        headers=[s[2] for s in sample],
        timestamps=[s[3] for s in sample],
        base_offset=1000,
        compression=codec,
        producer_id=77,
        producer_epoch=2,
        base_sequence=5,
        transactional=True,
    )
    batch = mod.DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert batch.is_transactional
    assert batch.producer_id == 77 and batch.base_sequence == 5
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(1000 + i, s[3], s[0], s[1], s[2]) for i, s in enumerate(sample)]


LEGACY_PEERS = [("aiokafka", aio_legacy, aio_codec), ("kafka-python", kp_legacy, kp_codec)]
LEGACY_CODECS = [0, 1, 2, 3]
# aiokafka refuses LZ4 in magic-0 message sets (their pre-KIP-57 framing) both ways;
# test_aiokafka_refuses_lz4_in_magic_0 pins that instead.
LEGACY_CASES = [
    pytest.param(peer, codec, magic, id=f"{peer[0]}-{codec}-{magic}")
    for peer in LEGACY_PEERS for codec in LEGACY_CODECS for magic in (0, 1)
    if not (peer[0] == "aiokafka" and codec == 3 and magic == 0)
]


def test_aiokafka_refuses_lz4_in_magic_0() -> None:
    builder = aio_legacy.LegacyRecordBatchBuilder(0, 3, 2**30)
    builder.append(0, timestamp=None, key=b"k", value=b"v")
    with pytest.raises(aio_legacy.UnsupportedCodecError, match="LZ4"):
        builder.build()
    data = encode_message_set([b"v"], keys=[b"k"], timestamps=[0], magic=0, compression=3)
    size = int.from_bytes(data[8:12], "big")
    with pytest.raises(aio_legacy.UnsupportedCodecError, match="LZ4"):
        list(aio_legacy.LegacyRecordBatch(data[:12 + size], 0))
    # kaflite itself reads what it wrote.
    assert [(bytes(r.key or b""), bytes(r.value or b"")) for r in iter_legacy_records(data)] \
        == [(b"k", b"v")]


@pytest.mark.parametrize(("peer", "codec", "magic"), LEGACY_CASES)
def test_peer_legacy_decodes_in_kaflite(peer: tuple[str, Any, Any], codec: int, magic: int) -> None:
    _, mod, codec_mod = peer
    _need(codec_mod, codec, magic)
    builder = mod.LegacyRecordBatchBuilder(magic, codec, 2**30)
    sample = _sample()
    for i, (key, value, _, ts) in enumerate(sample):
        builder.append(i, timestamp=ts if magic else None, key=key, value=value)
    data = bytes(builder.build())
    records = list(iter_legacy_records(data))
    assert [r.offset for r in records] == list(range(N))
    assert [_b(r.key) for r in records] == [s[0] for s in sample]
    assert [_b(r.value) for r in records] == [s[1] for s in sample]
    if magic:
        assert [r.timestamp for r in records] == [s[3] for s in sample]


@pytest.mark.parametrize(("peer", "codec", "magic"), LEGACY_CASES)
def test_kaflite_legacy_decodes_in_peer(peer: tuple[str, Any, Any], codec: int, magic: int) -> None:
    _, mod, codec_mod = peer
    _need(codec_mod, codec, magic)
    sample = _sample()
    base = 500
    data = encode_message_set(
        [s[1] for s in sample],
        keys=[s[0] for s in sample],
        timestamps=[s[3] for s in sample],
        magic=magic,
        compression=codec,
        base_offset=base,
    )
    got = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big")
        entry = mod.LegacyRecordBatch(data[pos : pos + 12 + size], magic)
        got += [(r.offset, r.key, r.value, r.timestamp) for r in entry]
        pos += 12 + size
    want_ts = [s[3] for s in sample] if magic else [None] * N
    assert got == [(base + i, s[0], s[1], want_ts[i]) for i, s in enumerate(sample)]
