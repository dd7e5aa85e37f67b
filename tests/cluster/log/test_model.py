"""A property test: random appends, reads, restarts, crashes and truncations against a model.

The model is a list of batches (base offset, last offset, values, producer
sequence range), a log start offset and a log end offset. After every step the
real log must agree with it on offsets, on the bytes each record carries, and
on what idempotent retries return.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kaflite.cluster.log import LogConfig, PartitionLog
from kaflite.protocol.records import iter_batches
from tests.cluster.log.helpers import T0, batch

PID = 77


@dataclass
class ModelBatch:
    base: int
    last: int
    values: list[bytes]
    size: int
    seq: tuple[int, int] | None  # first and last sequence of an idempotent batch


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="kaflite-log-model-"))
        self.config = LogConfig(segment_bytes=700, index_interval_bytes=128)
        self.log = PartitionLog.open(self.root / "model-0", self.config, now_ms=T0)
        self.batches: list[ModelBatch] = []
        self.log_start = 0
        self.leo = 0
        self.next_seq = 0
        self.counter = 0

    def teardown(self) -> None:
        self.log.close(flush=False)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------------
    def _values(self, sizes: list[int]) -> list[bytes]:
        out = []
        for size in sizes:
            self.counter += 1
            out.append(b"%06d" % self.counter + b"." * size)
        return out

    def _reopen(self) -> None:
        self.log = PartitionLog.open(self.root / "model-0", self.config, now_ms=T0)

    def _producer_batches(self) -> list[ModelBatch]:
        return [b for b in self.batches if b.seq is not None]

    # -- rules --------------------------------------------------------------------------------------
    @rule(sizes=st.lists(st.integers(0, 120), min_size=1, max_size=5), epoch=st.integers(0, 3))
    def append(self, sizes: list[int], epoch: int) -> None:
        values = self._values(sizes)
        data = batch(values)
        epoch = max(epoch, self.log.latest_epoch)
        result = self.log.append_as_leader(data, epoch, now_ms=T0)
        assert result.base_offset == self.leo and not result.duplicate
        self.batches.append(ModelBatch(self.leo, self.leo + len(values) - 1, values, len(data), None))
        self.leo += len(values)

    @rule(sizes=st.lists(st.integers(0, 60), min_size=1, max_size=4))
    def idempotent_append(self, sizes: list[int]) -> None:
        values = self._values(sizes)
        data = batch(values, pid=PID, epoch=0, seq=self.next_seq)
        result = self.log.append_as_leader(data, max(self.log.latest_epoch, 0), now_ms=T0)
        assert result.base_offset == self.leo and not result.duplicate
        seq = (self.next_seq, self.next_seq + len(values) - 1)
        self.batches.append(ModelBatch(self.leo, self.leo + len(values) - 1, values, len(data), seq))
        self.leo += len(values)
        self.next_seq = seq[1] + 1

    @precondition(lambda self: bool(self._producer_batches()))
    @rule(back=st.integers(1, 5))
    def retry(self, back: int) -> None:
        window = self._producer_batches()[-5:]
        target = window[-min(back, len(window))]
        assert target.seq is not None
        data = batch(target.values, pid=PID, epoch=0, seq=target.seq[0])
        result = self.log.append_as_leader(data, max(self.log.latest_epoch, 0), now_ms=T0)
        assert result.duplicate
        assert (result.base_offset, result.last_offset) == (target.base, target.last)

    @rule(data=st.data(), max_bytes=st.integers(0, 1500), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        max_offset = data.draw(st.integers(offset, self.leo))
        result = self.log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
        got = list(iter_batches(result.records, allow_partial=False))
        # Model: the batches at or after the one holding ``offset`` that are visible.
        candidates = [b for b in self.batches if b.last >= offset and b.last < max_offset]
        if not got:
            assert not candidates or (not min_one and candidates[0].size > max_bytes)
            assert result.next_offset == offset
            return
        assert result.next_offset == got[-1].next_offset  # no gaps in this log
        assert got[0].base_offset == candidates[0].base
        assert len(result.records) <= max_bytes or len(got) == 1
        assert len(got) <= len(candidates)
        for real, model in zip(got, candidates, strict=False):
            assert (real.base_offset, real.last_offset) == (model.base, model.last)
            assert [bytes(r.value or b"") for r in real] == model.values
            assert real.crc_ok()
        if len(got) < len(candidates):
            # The read stopped early only because the next batch did not fit or lies
            # in the next segment (a read never spans two segments).
            following = candidates[len(got)]
            crosses = any(got[-1].base_offset < s.base_offset <= following.base
                          for s in self.log.segments)
            assert crosses or len(result.records) + following.size > max_bytes

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        self.log.close(flush=clean)
        self._reopen()

    @rule(cut=st.integers(1, 10_000))
    def crash_with_torn_tail(self, cut: int) -> None:
        active = self.log.segments[-1]
        self.log.close(flush=False)
        if active.size_bytes and self.batches and self.batches[-1].base >= active.base_offset:
            last = self.batches.pop()
            path = Path(active.path)
            with open(path, "r+b") as f:
                f.truncate(os.path.getsize(path) - (cut % (last.size - 1) + 1))
            self.leo = last.base
            if last.seq is not None:
                self.next_seq = last.seq[0]
            if self.leo < self.log_start:
                # The log now ends below its start: it restarts empty at the start
                # offset and forgets every producer (truncate_fully_and_start_at).
                self.leo = self.log_start
                self.batches = []
                self.next_seq = 0
        self._reopen()

    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data())
    def truncate_to_batch_boundary(self, data: st.DataObject) -> None:
        bases = [b.base for b in self.batches if b.base >= self.log_start]
        if not bases:
            return
        offset = data.draw(st.sampled_from(bases))
        self.log.truncate_to(offset)
        dropped = [b for b in self.batches if b.base >= offset]
        self.batches = [b for b in self.batches if b.base < offset]
        self.leo = offset
        seqs = [b.seq for b in dropped if b.seq is not None]
        if seqs:
            self.next_seq = seqs[0][0]

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        assert self.log.delete_records_before(offset) == offset
        self.log_start = offset

    @rule()
    def roll(self) -> None:
        self.log.roll(now_ms=T0)

    @rule(limit=st.integers(0, 3000))
    def retention_by_size(self, limit: int) -> None:
        self.log.apply_retention(T0, retention_ms=-1, retention_bytes=limit)
        assert self.log.log_start_offset >= self.log_start
        self.log_start = self.log.log_start_offset
        segments = self.log.segments
        assert segments[0].base_offset <= self.log_start
        # Whatever is left could not lose its oldest segment and stay >= the limit.
        first = segments[0]
        assert self.log.size_bytes - first.size_bytes < limit or (
            len(segments) == 1 and first.size_bytes == 0
        )

    # -- invariants ---------------------------------------------------------------------------------
    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.log_start

    @invariant()
    def contents_agree(self) -> None:
        offset = self.log_start
        seen: list[tuple[int, bytes]] = []
        while offset < self.leo:
            result = self.log.read(offset, 1 << 20)
            got = list(iter_batches(result.records, allow_partial=False))
            assert got, f"no data at {offset} below the log end {self.leo}"
            for b in got:
                seen.extend((r.offset, bytes(r.value or b"")) for r in b if r.offset >= offset)
            assert result.next_offset == got[-1].next_offset
            offset = result.next_offset
        expected = [
            (b.base + i, v) for b in self.batches for i, v in enumerate(b.values)
            if b.base + i >= self.log_start
        ]
        assert seen == expected


LogMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestPartitionLogModel = LogMachine.TestCase
