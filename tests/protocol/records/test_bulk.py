"""The vectorised bulk decoder (``_bulk.decode_bulk``) against the general one.

For any records section, ``decode_bulk`` must either give exactly what
``decode_columns`` gives (offsets, timestamps, keys, values, headers and the end
position), or None, and None is only allowed where ``decode_columns`` raises or
the section holds something the bulk path leaves to it (a record of more than
8191 bytes, whose length takes three varint bytes, on the pure-Python path).
Every test runs on both paths: numpy, and numba's compiled loop (``_jit``).
Checked on valid sections of
every shape (null and empty keys and values, lengths across the one/two/three
byte varint limits, headers, timestamp and offset deltas of any width, a
LogAppendTime), as views and as bytes, and on sections with bytes flipped,
inserted or cut off.
"""

from __future__ import annotations

from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.protocol._exceptions import RemoteProtocolError
from kaflite.protocol.records import RecordBatch, encode_batch, encode_records
from kaflite.protocol.records._bulk import decode_bulk
from kaflite.protocol.records._decode import RecordColumns, decode_columns

pytestmark = pytest.mark.usefixtures("codec_path")

BASE_OFFSET = 1_000
BASE_TS = 1_700_000_000_000

field = st.one_of(st.none(), st.integers(0, 70).map(lambda n: b"k" * n),
                  st.integers(0, 70).map(lambda n: b"\x00" * n),
                  st.integers(60, 300).map(lambda n: bytes(range(256)) * (n // 256)
                                           + b"v" * (n % 256)))
header = st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=8)))
record = st.tuples(field, field, st.one_of(st.none(), st.lists(header, min_size=1, max_size=2)),
                   st.sampled_from([0, 0, 0, 1, -5, 300, 70_000, -(1 << 40)]))


def _section(recs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None,
                              int]], offsets: str) -> bytes:
    n = len(recs)
    deltas = {"count": None, "gaps": [3 * i for i in range(n)],
              "from5": [5 + i for i in range(n)]}[offsets]
    return encode_records([v for _, v, _, _ in recs], keys=[k for k, _, _, _ in recs],
                          headers=[h for _, _, h, _ in recs],
                          timestamp_deltas=[t for _, _, _, t in recs], offset_deltas=deltas)


def _as_tuple(cols: RecordColumns) -> tuple[object, ...]:
    def raw(xs: list[memoryview | None]) -> list[bytes | None]:
        return [None if x is None else bytes(x) for x in xs]
    heads = [tuple((k, None if v is None else bytes(v)) for k, v in h) for h in cols.headers]
    return (list(cols.offsets), cols.timestamps, raw(cols.keys), raw(cols.values), heads)


def _agree(section: bytes, count: int, log_append_time: int | None = None,
           allow_none: bool = False) -> None:
    """decode_bulk on ``section`` gives decode_columns's answer or None (when allowed,
    or when decode_columns raises)."""
    try:
        expected: tuple[RecordColumns, int] | None = decode_columns(
            memoryview(section), count, BASE_OFFSET, BASE_TS, log_append_time)
    except RemoteProtocolError:
        expected = None
    for buf in (memoryview(section), section):
        # (bytes go in under the memoryview type, as _stride passes them)
        got = decode_bulk(cast(memoryview, buf), count, BASE_OFFSET, BASE_TS, log_append_time)
        if expected is None:
            assert got is None
            continue
        if got is None:
            assert allow_none, "the bulk path gave up on a valid section"
            continue
        assert got[1] == expected[1]
        assert _as_tuple(got[0]) == _as_tuple(expected[0])
        kinds = {type(x) for x in got[0].keys + got[0].values if x is not None}
        assert kinds <= {bytes if isinstance(buf, bytes) else memoryview}


@settings(max_examples=200, deadline=None)
@given(st.lists(record, min_size=1, max_size=90), st.sampled_from(["count", "gaps", "from5"]),
       st.booleans())
def test_valid_sections_decode_as_decode_columns_does(recs: list[tuple[
        bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int]],
        offsets: str, log_append: bool) -> None:
    section = _section(recs, offsets)
    _agree(section, len(recs), BASE_TS + 7 if log_append else None)


@settings(max_examples=300, deadline=None)
@given(st.lists(record, min_size=1, max_size=40), st.data())
def test_damaged_sections_decode_as_decode_columns_does_or_not_at_all(
        recs: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None,
                         int]], data: st.DataObject) -> None:
    section = bytearray(_section(recs, "count"))
    how = data.draw(st.sampled_from(["flip", "insert", "cut", "count"]))
    at = data.draw(st.integers(0, len(section) - 1))
    count = len(recs)
    if how == "flip":
        section[at] = data.draw(st.integers(0, 255))
    elif how == "insert":
        section[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    elif how == "cut":
        del section[at:]
    else:
        count += data.draw(st.sampled_from([-1, 1]))
    if count > 0:
        _agree(bytes(section), count, allow_none=True)


@pytest.mark.parametrize("body", [
    b"\x00\x00\x00\x03\x02x\x00",         # key length -2
    b"\x00\x00\x00\x01\x05x\x00",         # value length -3
    b"\x00\x00\x00\x01\x02x\x00\x00",     # a byte after the header count
    b"\x00\x00\x00\x01\x02x\x02",         # a header count past the record
    b"\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01\x00\x01\x00\x00",  # an 11-byte varint
])
def test_invalid_records_are_refused(body: bytes) -> None:
    """Records decode_columns refuses: the bulk path must not decode them."""
    good = b"\x0e\x00\x00\x00\x01\x02x\x00"    # (length 7: null key, value b"x")
    for count, section in ((1, bytes([len(body) * 2]) + body),
                           (71, good * 70 + bytes([len(body) * 2]) + body)):
        with pytest.raises(RemoteProtocolError):
            decode_columns(memoryview(section), count, 0, 0)
        assert decode_bulk(memoryview(section), count, 0, 0) is None


def test_long_records_are_left_to_decode_columns(codec_path: str) -> None:
    """A record of more than 8191 bytes has a three-byte length: not the numpy path's
    (numba's loop reads any length)."""
    section = encode_records([b"x" * 9000, b"y"], keys=[None, b"k"])
    got_long = decode_bulk(memoryview(section), 2, 0, 0)
    if codec_path == "jit":
        assert got_long is not None and bytes(got_long[0].values[0] or b"") == b"x" * 9000
    else:
        assert got_long is None
    values = [b"v" * (50 + i % 100) for i in range(500)]
    section = encode_records(values, keys=[b"key-%d" % i for i in range(500)])
    got = decode_bulk(memoryview(section), 500, 0, 0)
    assert got is not None and [bytes(v or b"") for v in got[0].values] == values


def test_batches_of_varied_records_decode_through_the_bulk_path() -> None:
    """RecordBatch.columns (views and bytes) on a varied batch, against one by one."""
    n = 3000
    keys: list[bytes | None] = [b"key-%d" % i if i % 5 else None for i in range(n)]
    values = [b"%d" % i * (1 + i % 40) for i in range(n)]
    data = encode_batch(values, keys=keys, base_timestamp=BASE_TS)
    batch = RecordBatch.from_buffer(data)
    expected = [(r.offset, r.timestamp, None if r.key is None else bytes(r.key),
                 bytes(r.value or b"")) for r in batch.iter_one_by_one()]
    for copy in (False, True):
        cols = batch.columns(copy=copy)
        got = [(o, t, None if k is None else bytes(k), bytes(v or b""))
               for o, t, k, v in zip(cols.offsets, cols.timestamps, cols.keys, cols.values,
                                     strict=True)]
        assert got == expected
        assert all(isinstance(v, bytes if copy else memoryview) for v in cols.values)
    flags = batch.columns(fields=False)
    assert [k is None for k in flags.keys] == [k is None for k in keys]
