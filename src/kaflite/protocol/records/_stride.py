"""The bulk decoder's fast path: runs of records that share one shape.

Theory of operation
-------------------
``shape.RecordShape`` finds runs of same-shape records with C-level comparisons
(see that module). A run is decoded from its columns: offsets from a ``range``,
timestamps from the delta columns through lookup tables (one- and two-byte
deltas), keys and values as ``memoryview`` slices, or as ``bytes`` cut out in C
by one ``struct`` format.

Anything else (headers, a varint width that changes, a record that does not
match) falls back to ``_decode.decode_columns`` for a stretch of records, after
which the fast path is tried again: batches made of runs (keys ``key-1`` to
``key-999`` change length twice) go back to the strided runs at once. When the
fast path fails again right after such a stretch, the records vary throughout,
and ``_bulk.decode_bulk`` decodes every record left in one vectorised pass
(where it cannot, the stretches of ``decode_columns`` go on). A short probe is made before a full-length
attempt, so batches of varied records pay little for the attempt.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import repeat
from operator import add
from typing import Any, cast

from kaflite.protocol.records._bulk import BULK_MIN, decode_bulk
from kaflite.protocol.records._decode import NO_HEADERS, RecordColumns, decode_columns
from kaflite.protocol.records.shape import RecordShape

__all__ = ["decode_columns_fast"]

_PROBE = 32  # records checked before a longer attempt
_WINDOW = 1024  # then this many, before the rest of the batch
_MIN_RUN = 16  # fewer records left than this: the slow path decodes them
# A run of at least this many records found is decoded strided, however short (runs
# of 10 and 90 in keys key-0..key-99); a shorter one sends the next _FALLBACK
# records to the slow path.
_SHORT_RUN = 4
_FALLBACK = 64
# Offset deltas whose varint is one byte wider than the delta before (64: two bytes,
# 8192: three). A run that ends just before one ended because of it, not because the
# records vary: it is decoded strided however short (the record at delta 63 alone).
_OD_WIDENS = frozenset({64, 8192})


# zigzag decode of z < 2**14 (one- and two-byte varints)
_UNZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]
_LOW7 = [b & 0x7F for b in range(256)]
_SHL7 = [b << 7 for b in range(256)]


# (base timestamp, base + delta for the one-byte zigzag deltas 0..127): the last batch's
_TS_TABLE: tuple[int, list[int]] = (-1, [])


def _ts_table(base: int) -> list[int]:
    global _TS_TABLE
    table = list(map(add, repeat(base, 128), _UNZIGZAG[:128]))
    _TS_TABLE = (base, table)
    return table


# (field length, record size, records) -> Struct.unpack_from of such a run
_UNPACKERS: dict[tuple[int, int, int], Callable[[memoryview, int], tuple[Any, ...]]] = {}


class _Template(RecordShape):
    """A record shape that also decodes its runs into columns."""

    __slots__ = ()

    def decode(
        self, buf: memoryview, p: int, k: int, base_timestamp: int, copy: bool = False,
        fields: bool = True,
    ) -> tuple[list[int], list[memoryview | None], list[memoryview | None]]:
        """Timestamps, keys and values of ``k`` matching records from ``p``.

        ``fields=False`` (validation): keys and values are not cut out; each is
        ``None`` where the record has none and an empty placeholder otherwise.
        """
        size = self.size
        stop = p + k * size
        ts0 = bytes(buf[p + self.ts_at : stop : size])
        if self.ts_width == 1:
            if ts0 == bytes(len(ts0)):
                timestamps = [base_timestamp] * k
            else:
                # one table of the batch's 128 one-byte timestamps, shared by its runs:
                # a lookup a record, no new int
                cached = _TS_TABLE   # (read once: another thread may replace it)
                table = cached[1] if cached[0] == base_timestamp else _ts_table(base_timestamp)
                timestamps = list(map(table.__getitem__, ts0))
        else:
            ts1 = bytes(buf[p + self.ts_at + 1 : stop : size])
            z = map(add, map(_LOW7.__getitem__, ts0), map(_SHL7.__getitem__, ts1))
            timestamps = list(map(add, repeat(base_timestamp, k), map(_UNZIGZAG.__getitem__, z)))
        if not fields:
            return timestamps, _placeholders(self.key_len, k), _placeholders(self.value_len, k)
        keys = self._slices(buf, p + self.key_at, stop, self.key_len, k, copy)
        values = self._slices(buf, p + self.value_at, stop, self.value_len, k, copy)
        return timestamps, keys, values

    def _slices(
        self, buf: memoryview, first: int, stop: int, length: int, k: int, copy: bool
    ) -> list[memoryview | None]:
        if length < 0:
            return [None] * k
        size = self.size
        if copy:
            # Copies wanted (``RecordBatch.columns(copy=True)``): one struct format
            # "skip, take ``length``" repeated ``k`` times cuts every field out in C,
            # about 4x faster than slicing in a loop. Runs of one shape repeat from
            # batch to batch (and within one: keys key-0..key-999 make runs of 10, 90
            # and 900 records), so the compiled formats are kept, whatever the run's
            # position: compiling one costs about 30 ns a record.
            shape = (length, size, k)
            unpack = _UNPACKERS.get(shape)
            if unpack is None:
                if len(_UNPACKERS) >= 256:
                    _UNPACKERS.clear()
                fmt = f"{length}s{size - length}x" * (k - 1) + f"{length}s"
                unpack = _UNPACKERS[shape] = struct.Struct(fmt).unpack_from
            return list(unpack(buf, first))
        # A comprehension beats map(slice, ...): BUILD_SLICE is cheaper than
        # calling the slice type, and the view is created by BINARY_SUBSCR.
        return [buf[a : a + length] for a in range(first, stop, size)]


_EMPTY = memoryview(b"")


def _placeholders(length: int, k: int) -> list[memoryview | None]:
    return [None] * k if length < 0 else [_EMPTY] * k


def decode_columns_fast(
    buf: memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
    copy: bool = False,
    fields: bool = True,
) -> tuple[RecordColumns, int]:
    """Like ``decode_columns``, using strided column decoding where records line up.

    ``copy``: keys, values and header values are ``bytes`` rather than views, all
    cut out of one ``bytes`` copy of ``buf`` (the decoders only index and slice,
    which ``bytes`` does as ``memoryview`` does).

    ``fields=False`` is for validation: every record is checked as fully, but the
    keys and values of strided runs are not cut out (see ``_Template.decode``).
    """
    # The strided column checks and the general decoder both read ``bytes`` faster
    # than a ``memoryview`` (a strided slice of a view is copied element by element),
    # so wherever ``bytes`` are wanted (copies, or validation, which keeps nothing)
    # the section is copied once, up front, whatever its records' size: a memcpy of
    # 1 MiB takes about 19 us, and without it each run check copied its window of the
    # view again (1 KiB records with keys key-0..key-999, 1,000 to a batch: 156-190
    # ns a record, against 131-156 with the one copy; docs/benchmarks.md).
    if copy or not fields:
        buf = cast(memoryview, bytes(buf))
    if count < _MIN_RUN:
        return decode_columns(buf, count, base_offset, base_timestamp, log_append_time)
    out = RecordColumns([], [], [], [], [])
    size = len(buf)
    p = 0
    i = 0
    fell_back = False   # the last stretch went to decode_columns
    last_run = 0   # records in the last strided run
    bulk_refused = False   # (then it would refuse the rest again: not asked twice)
    while i < count:
        left = count - i
        k = 0
        try:
            template = _Template(buf, p)
        except IndexError:
            template = None
        if template is not None and template.size and template.ts_width <= 2 \
                and left >= _MIN_RUN:
            k_max = min(left, (size - p) // template.size)
            # A short probe, a window of _WINDOW, then the rest, each window checked
            # alone: a run costs about what its own records do, not a pass over the
            # rest of the batch (keys key-0..key-999 make runs of 10, 90 and 900).
            # (after a run of _PROBE or more, runs are long here: no probe)
            k = 0
            first = _WINDOW if last_run >= _PROBE else _PROBE
            for want in (min(k_max, first), min(k_max, _WINDOW), k_max):
                if want > k:
                    k += template.run_length(buf, p + k * template.size, want - k, i + k, p)
                    if k < want:
                        break
        if template is not None and (k >= _SHORT_RUN or (k and i + k in _OD_WIDENS)):
            timestamps, keys, values = template.decode(
                buf, p, k, base_timestamp, copy, fields)
            out.offsets += range(base_offset + i, base_offset + i + k)
            out.timestamps += timestamps
            out.keys += keys
            out.values += values
            out.headers += [NO_HEADERS] * k
            p += k * template.size
            i += k
            last_run = k
            fell_back = False
        else:
            last_run = 0
            bulk = decode_bulk(buf, left, base_offset, base_timestamp, None, p, fields) \
                if fell_back and not bulk_refused and left >= BULK_MIN else None
            if bulk is not None:   # every record left, in one vectorised pass
                cols, p = bulk
                n = left
            else:
                bulk_refused = fell_back and left >= BULK_MIN
                n = min(left, _FALLBACK)
                cols, p = decode_columns(buf, n, base_offset, base_timestamp, None, p)
                fell_back = True
            if not out.offsets:
                out = cols
            else:
                out.extend(cols)
            i += n
    if log_append_time is not None:
        out.timestamps = [log_append_time] * count
    return out, p
