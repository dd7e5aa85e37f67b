"""Coordinator state kept in an internal topic: replaying it, and appending to it.

Both coordinators (groups on ``__consumer_offsets``, transactions on
``__transaction_state``) work the same way. The broker that leads partition
*p* of the topic owns every key that hashes to *p*; when it becomes leader it
replays the partition from the log start (``replay_partition``), and every
change it makes afterwards is a batch appended to that leader log
(``PartitionWriter``), answered once the in-sync followers have it too, so a
new leader replays the same state.

A writer's result is a Kafka error code, translated the way Kafka's
coordinator runtime does it (``normalize_error``): a timeout or missing
replicas mean "try again later" (COORDINATOR_NOT_AVAILABLE), a lost
leadership means NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflite.cluster.log import AppendOrigin, LogError, PartitionLog
from kaflite.protocol import errors
from kaflite.protocol.records import RecordBatch, encode_batch, iter_batches

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition

__all__ = ["PartitionWriter", "Record", "normalize_error", "replay_partition"]

Record = tuple[bytes, bytes | None]

_COORDINATOR_NOT_AVAILABLE = {
    errors.UnknownTopicOrPartitionError.code, errors.NotEnoughReplicasError.code,
    errors.NotEnoughReplicasAfterAppendError.code, errors.RequestTimedOutError.code,
}
_NOT_COORDINATOR = {errors.NotLeaderOrFollowerError.code, errors.KafkaStorageError.code}
_UNKNOWN_SERVER = {errors.MessageTooLargeError.code, errors.RecordListTooLargeError.code,
                   errors.InvalidFetchSizeError.code}


def normalize_error(code: int) -> int:
    """A log append's error as the coordinator reports it (Kafka's ``normalizeException``)."""
    if code in _COORDINATOR_NOT_AVAILABLE:
        return errors.CoordinatorNotAvailableError.code
    if code in _NOT_COORDINATOR:
        return errors.NotCoordinatorError.code
    if code in _UNKNOWN_SERVER:
        return errors.UnknownServerError.code
    return code


async def replay_partition(plog: PartitionLog, still_current: Callable[[], bool],
                           chunk_bytes: int, apply: Callable[[RecordBatch], None]) -> bool:
    """Hand every batch from the log start to the log end to ``apply``; False if abandoned."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        if not still_current():
            return False
        res = plog.read(offset, chunk_bytes, max_offset=end)
        if res.records:
            for batch in iter_batches(res.records):
                if batch.last_offset >= offset:
                    apply(batch)
        if res.next_offset <= offset:
            break
        offset = res.next_offset
        await asyncio.sleep(0)  # let other partitions and requests run between chunks
    return still_current()


# A coordinator write that waits this long for its replicas is logged with their state.
SLOW_WRITE_S = 1.0
LOG = logging.getLogger("kaflite.cluster.coordinator")


def _log_slow_write(p: Partition, end_offset: int, waited: float, code: int) -> None:
    now = time.monotonic() * 1000
    followers = ", ".join(
        f"{r}: end {f.log_end_offset}, fetched {now - f.last_fetch_ms:.0f} ms ago"
        for r, f in sorted(p.followers.items()))
    LOG.warning("%s-%d: a coordinator write to %d waited %.2f s for replication (error %d); "
                "epoch %d, high watermark %d, log end %d, ISR %s; followers %s",
                p.topic, p.index, end_offset, waited, code, p.leader_epoch, p.high_watermark,
                p.log_end_offset, p.isr, followers or "none")


class PartitionWriter:
    """Appends coordinator records to the leader log of one internal-topic partition."""

    def __init__(self, broker: Broker, topic: str, index: int, epoch: int,
                 timeout_ms: int) -> None:
        self.broker = broker
        self.topic = topic
        self.index = index
        self.epoch = epoch
        self.timeout_s = timeout_ms / 1000
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, records: list[Record], *, producer_id: int = -1,
                 producer_epoch: int = -1) -> asyncio.Future[int]:
        """Append ``records``; a producer id makes it a transactional batch of that producer."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        name = f"{self.topic}-{self.index}"
        p = self.broker.partitions.get((self.topic, self.index))
        try:
            if p is None or not p.is_leader or p.leader_epoch != self.epoch:
                raise errors.NotCoordinatorError(name)
            min_isr = p.require_min_isr()
            now = int(time.time() * 1000)
            batch = encode_batch([v for _, v in records], keys=[k for k, _ in records],
                                 base_timestamp=now, producer_id=producer_id,
                                 producer_epoch=producer_epoch, transactional=producer_id >= 0)
            result = p.log.append_as_leader(batch, p.leader_epoch, now_ms=now,
                                            origin=AppendOrigin.COORDINATOR)
        except errors.KafkaError as exc:
            fut.set_result(normalize_error(exc.code))
            return fut
        except LogError:
            fut.set_result(errors.NotCoordinatorError.code)
            return fut
        p.wake_fetchers()
        p.maybe_advance_hw()

        async def wait() -> None:
            start = time.monotonic()
            try:
                await p.wait_replicated(result.last_offset + 1, self.timeout_s, min_isr)
                code = 0
            except errors.KafkaError as exc:
                code = errors.NotCoordinatorError.code if p.leader_epoch != self.epoch \
                    else normalize_error(exc.code)
            waited = time.monotonic() - start
            if waited >= SLOW_WRITE_S:
                _log_slow_write(p, result.last_offset + 1, waited, code)
            if not fut.done():
                fut.set_result(code)

        task = loop.create_task(wait())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return fut
