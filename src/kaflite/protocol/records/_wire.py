"""Layout constants, attribute bits and varint tables shared by the record modules.

The v2 batch header (Kafka's DefaultRecordBatch) is 61 bytes::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8
    | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64
    | maxTimestamp int64 | producerId int64 | producerEpoch int16
    | baseSequence int32 | recordCount int32

``batchLength`` counts the bytes after itself (so a batch occupies
``12 + batchLength`` bytes), and the CRC-32C covers everything from the
attributes to the end of the batch: baseOffset and partitionLeaderEpoch can be
rewritten by a broker without touching the CRC.

The varint tables hold the encoded zigzag varint of every int in
``[0, TABLE_SIZE)`` as a ``bytes`` object, so the bulk encoder turns a column of
lengths into a column of encodings with one ``map`` over ``list.__getitem__``.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Sequence

import crc32c as _crc32c

from kaflite.protocol._exceptions import LocalProtocolError

# -- batch layout --------------------------------------------------------------

# CRC-32C (``crc32c(data, value=0)``) that keeps the GIL. The crc32c package lets
# it go for 32 KiB and more, so that other threads may run meanwhile; but taking
# it back waits for the thread that got it, up to the interpreter's switch
# interval (5 ms), while the checksum itself takes about 25 us for 512 KiB. The
# sync producer's loop thread, checksumming each batch while the caller thread
# produced, lost up to that long a batch (docs/benchmarks.md, issue 24).
crc32c: Callable[..., int] = functools.partial(_crc32c.crc32c, gil_release_mode=0)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
assert HEADER_SIZE == 61

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORD_COUNT_OFFSET = 57
# The batch length counts from the leader epoch onwards.
LOG_OVERHEAD = 12
# Smallest batchLength of a well-formed v2 batch (a header and no records).
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

# Smallest encoded record: length, attributes, timestampDelta, offsetDelta,
# key length, value length, header count: one byte each.
MIN_RECORD_SIZE = 7
# Largest framing of a record around its key, value and headers: length (varint, 5),
# attributes (1), timestampDelta (varlong, 10), offsetDelta, key length, value length
# and header count (varints, 5 each).
RECORD_FRAMING_MAX = 36

# -- attribute bits ----------------------------------------------------------------

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40  # KIP-534: baseTimestamp holds the delete horizon

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")

# -- varints ------------------------------------------------------------------------

TABLE_SIZE = 1 << 14


def encode_zigzag(value: int) -> bytes:
    """Zigzag varlong encoding of any int64."""
    if not -(1 << 63) <= value < (1 << 63):
        raise LocalProtocolError(f"varlong out of range: {value}")
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# VARINT[v] is the zigzag varint of v, for 0 <= v < TABLE_SIZE.
VARINT: list[bytes] = [encode_zigzag(v) for v in range(TABLE_SIZE)]
# VARINT_SIZE_PLUS[v] = len(VARINT[v]) + v: the bytes a length-prefixed field of
# v bytes takes (its prefix and its payload).
VARINT_SIZE_PLUS: list[int] = [len(VARINT[v]) + v for v in range(TABLE_SIZE)]
NULL_VARINT = b"\x01"  # zigzag(-1): a null key or value
ZERO_VARINT = b"\x00"

# ZIGZAG[z] decodes a single-byte zigzag value (z < 128).
ZIGZAG: list[int] = [(z >> 1) ^ -(z & 1) for z in range(128)]


def varints(values: Sequence[int]) -> list[bytes]:
    """The zigzag varint encodings of ``values``, table-driven when in range."""
    if not values:
        return []
    if min(values) >= 0 and max(values) < TABLE_SIZE:
        return list(map(VARINT.__getitem__, values))
    table = VARINT
    return [table[v] if 0 <= v < TABLE_SIZE else encode_zigzag(v) for v in values]


def varint(value: int) -> bytes:
    """One zigzag varint, from the table when possible."""
    if 0 <= value < TABLE_SIZE:
        return VARINT[value]
    return encode_zigzag(value)


def sizes_plus(lengths: Iterable[int]) -> list[int]:
    """``[len(varint(n)) + n for n in lengths]`` (lengths are non-negative)."""
    table = VARINT_SIZE_PLUS
    return [table[n] if n < TABLE_SIZE else len(encode_zigzag(n)) + n for n in lengths]
