"""Offsets as Spark writes them, and the planning of offset ranges.

Spark's Kafka source keeps its position in the checkpoint as JSON, one entry
per partition holding the *next* offset to read::

    {"events": {"0": 1200, "1": 1187}}

kaflite's streaming reader hands Spark exactly this shape (partitions sorted,
so the same position always serializes to the same string), so a query
restarted from its checkpoint resumes at the same offsets, and a checkpoint
reads the same way to a person who knows Spark's.

Planning turns a start and an end position into ``OffsetRange`` s, one Spark
task each:

* ``rate_limit`` caps a micro-batch at ``maxOffsetsPerTrigger`` records and
  shares the cap among partitions in proportion to their backlog; a partition
  whose share rounds below one still gets one offset, so none starves.
* ``plan_ranges`` drops empty ranges, then splits ranges: with
  ``minPartitions`` larger than the number of ranges, large ranges are cut in
  proportion to their size so that there are about ``minPartitions`` tasks
  (a range too small to deserve two parts stays whole); with
  ``maxRecordsPerPartition``, any range still larger than that is cut into
  equal parts below it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kaflite.client import TopicPartition

__all__ = [
    "OffsetRange",
    "PartitionOffsets",
    "SparkOffsets",
    "from_json",
    "offsets_behind_latest",
    "plan_ranges",
    "rate_limit",
    "to_json",
]

PartitionOffsets = dict[TopicPartition, int]
# Spark's offset JSON, parsed: {"topic": {"partition": offset}}
SparkOffsets = dict[str, dict[str, int]]


def to_json(offsets: Mapping[TopicPartition, int]) -> SparkOffsets:
    """``{tp: offset}`` → Spark's ``{"topic": {"partition": offset}}``, sorted."""
    out: SparkOffsets = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """Spark's offset JSON (already parsed) → ``{tp: offset}``."""
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        for p, off in parts.items():
            out[TopicPartition(topic, int(p))] = int(off)
    return out


@dataclass(frozen=True)
class OffsetRange:
    """Records ``from_offset`` (inclusive) to ``until_offset`` (exclusive) of a partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        """An estimate: compaction and transaction markers leave gaps in offsets."""
        return self.until_offset - self.from_offset

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}[{self.from_offset}, {self.until_offset})"


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out = []
    start, remaining = r.from_offset, r.size
    for i in range(parts):
        share = remaining // (parts - i)  # the last part takes the rounding
        remaining -= share
        out.append(OffsetRange(r.topic, r.partition, start, start + share))
        start += share
    return [x for x in out if x.size > 0]


def plan_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None = None,
                max_records_per_partition: int | None = None) -> list[OffsetRange]:
    """Spark tasks for ``ranges``: empty ones dropped, large ones split."""
    todo = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(todo) < min_partitions:
        total = sum(r.size for r in todo)

        def parts_of(size: int, of_total: int, wanted: int) -> int:
            return max(round(size / of_total * wanted), 1)

        # Ranges that would get one part anyway are left out of the proportional
        # share, so the big ones are cut finely enough to reach min_partitions.
        whole = [r for r in todo if parts_of(r.size, total, min_partitions) == 1]
        whole_ids = {id(r) for r in whole}
        split_total = total - sum(r.size for r in whole)
        split_wanted = max(min_partitions - len(whole), 1)
        out: list[OffsetRange] = []
        for r in todo:
            n = 1 if id(r) in whole_ids else parts_of(r.size, split_total, split_wanted)
            out += _split(r, n)
        todo = out
    if max_records_per_partition is not None:
        out = []
        for r in todo:
            out += _split(r, max(math.ceil(r.size / max_records_per_partition), 1))
        todo = out
    return todo


def rate_limit(limit: int, start: Mapping[TopicPartition, int],
               latest: Mapping[TopicPartition, int],
               new_partition_starts: Mapping[TopicPartition, int] | None = None
               ) -> PartitionOffsets:
    """End offsets that read at most about ``limit`` records past ``start``.

    The cap is shared in proportion to each partition's backlog. Partitions
    in ``latest`` but not in ``start`` (added since) begin at
    ``new_partition_starts`` (their earliest offsets).
    """
    new = new_partition_starts or {}
    backlog: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, new.get(tp))
        if begin is not None and end - begin > 0:
            backlog[tp] = end - begin
    total = sum(backlog.values())
    if total < 1:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        size = backlog.get(tp)
        if size is None:
            out[tp] = end
            continue
        begin = start.get(tp, new.get(tp, 0))
        share = limit * (size / total)
        # Don't starve a small partition: a share below one still reads one offset.
        n = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + n)
    return out


def offsets_behind_latest(consumed: Mapping[TopicPartition, int],
                          latest: Mapping[TopicPartition, int]) -> dict[str, str]:
    """Spark's source metrics: min/max/avg offsets behind the latest per partition."""
    behind = [end - consumed[tp] for tp, end in latest.items() if tp in consumed]
    if not behind:
        return {}
    return {"minOffsetsBehindLatest": str(min(behind)),
            "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": str(sum(behind) / len(behind))}
