"""``encode_batch_buffer``: the producer's one-copy batch encoder.

It joins the header's room and the records in one buffer, then packs the header
and the CRC into it. Whatever the records' shape (values only, keys, nulls,
headers, stamped, compressed, idempotent and transactional fields), its bytes
must be ``encode_batch``'s, and the batch must pass the CRC check and decode
back to the records.
"""

from __future__ import annotations

from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.protocol._exceptions import LocalProtocolError
from kaflite.protocol.records import (
    Compression,
    RecordBatch,
    encode_batch,
    encode_batch_buffer,
)

BASE_TS = 1_700_000_000_000
FIELD = st.none() | st.binary(max_size=300)


@settings(max_examples=120, deadline=None)
@given(
    records=st.lists(st.tuples(FIELD, FIELD), min_size=1, max_size=60),
    keyed=st.booleans(),
    stamped=st.booleans(),
    with_headers=st.booleans(),
    compression=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4]),
    transactional=st.booleans(),
)
def test_same_bytes_as_encode_batch(records: list[tuple[bytes | None, bytes | None]],
                                    keyed: bool, stamped: bool, with_headers: bool,
                                    compression: int, transactional: bool) -> None:
    n = len(records)
    values = [v for _, v in records]
    keys = [k for k, _ in records] if keyed else None
    headers = [[("h", b"x")] if i % 2 else None for i in range(n)] if with_headers else None
    stamps = [BASE_TS + (i * 7) % 100 for i in range(n)] if stamped else None
    buf = encode_batch_buffer(values, keys, headers, stamps, compression, 42, 3, 17,
                              transactional, BASE_TS)
    assert isinstance(buf, bytearray)
    assert bytes(buf) == encode_batch(
        values, keys, headers, stamps, compression=compression, producer_id=42,
        producer_epoch=3, base_sequence=17, transactional=transactional,
        base_timestamp=BASE_TS)
    batch = RecordBatch.from_buffer(buf)
    assert batch.crc_ok()
    assert batch.producer_id == 42 and batch.base_sequence == 17
    got = [(r.key, r.value) for r in batch.iter_one_by_one()]
    assert [(None if k is None else bytes(k), None if v is None else bytes(v))
            for k, v in got] == [(k if keyed else None, v) for k, v in records]


@pytest.mark.parametrize("wrong", ["text", 7])
def test_a_value_of_the_wrong_type_is_a_protocol_error(wrong: object) -> None:
    values = cast("list[bytes]", [b"ok", bytearray(b"fine"), memoryview(b"also"), wrong])
    with pytest.raises(LocalProtocolError):
        encode_batch_buffer(values)
    assert encode_batch_buffer(values[:3]) == encode_batch(values[:3])
