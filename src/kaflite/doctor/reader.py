"""Reading the request log into an ``Analyzer``: the doctor's one piece of I/O.

``kaflite doctor`` and the console's Health view both read ``__kaflite_requests``
the same way, through kaflite's asyncio consumer: every partition assigned (no
group, nothing committed), positioned at the first record of the last ``minutes``
(``offsets_for_times``; 0: the whole log), and each poll's records decoded, sorted
by their ``timestamp`` and fed to the analyzer. The analyzer itself does no I/O
(``kaflite.doctor``); this module is the only part of the package that talks to a
cluster, and ``kaflite.doctor`` does not import it.

``RequestLogReader.catch_up`` reads to the end offsets the log had when it was
called and stops there, however busy the log is (it never chases the records
written meanwhile: those are the next call's). ``read_for`` reads for a while.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from kaflite.client import Admin, Consumer, TopicPartition
from kaflite.cluster.request_log import REQUEST_LOG_TOPIC, RequestRecord
from kaflite.doctor._analyzer import Analyzer
from kaflite.protocol import errors

__all__ = ["DOCTOR_CLIENT_ID", "RequestLogOff", "RequestLogReader", "how_to_enable"]

DOCTOR_CLIENT_ID = "kaflite-doctor"   # `kaflite doctor`'s own clients, left out of reports
POLL_MS = 200
CATCH_UP_S = 60.0    # a catch-up that has not reached the ends by then stops (a bound)

Keep = Callable[[RequestRecord], bool]


class RequestLogOff(Exception):
    """The request log topic does not exist on the cluster."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"the request log topic {topic} does not exist")
        self.topic = topic


def how_to_enable() -> str:
    """What to do when the log is off (one sentence, for every reader's message)."""
    return ("Turn it on: `kaflite up --request-log` (the broker config "
            "kaflite.request.log.enable=true), or put `kaflite proxy --request-log` in "
            "front of any Kafka; then run the clients again.")


def decode(values: list[bytes | bytearray | memoryview | None]) -> list[RequestRecord]:
    """Request log values as records, oldest first; a value that is not one is skipped."""
    records: list[RequestRecord] = []
    for value in values:
        if value is None:
            continue
        try:
            records.append(RequestRecord.decode(bytes(value)))
        except (ValueError, TypeError):
            continue
    records.sort(key=lambda r: r.timestamp)
    return records


class RequestLogReader:
    """One consumer of the whole request log; ``open`` first, ``close`` at the end."""

    def __init__(self, config: Mapping[str, object], topic: str = REQUEST_LOG_TOPIC,
                 keep: Keep | None = None) -> None:
        """``config``: the client properties (``bootstrap.servers``, ``client.id``,
        security); ``keep``: which records to feed (all by default)."""
        self.config = dict(config)
        self.topic = topic
        self.keep = keep
        self.read_records = 0
        self._consumer: Consumer[bytes, bytes] | None = None
        self._tps: list[TopicPartition] = []

    async def open(self, minutes: float) -> None:
        """Assign every partition of the log, from ``minutes`` ago (0: the beginning).
        Raises ``RequestLogOff`` when the topic does not exist."""
        async with Admin(self.config) as admin:
            try:
                described = await admin.describe_topics([self.topic])
            except errors.UnknownTopicOrPartitionError:
                raise RequestLogOff(self.topic) from None
        self._tps = [TopicPartition(self.topic, p.partition)
                     for p in described[self.topic].partitions]
        consumer: Consumer[bytes, bytes] = Consumer({
            **self.config, "allow.auto.create.topics": False, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"})
        try:
            consumer.assign(self._tps)
            await self._seek(consumer, minutes)
        except BaseException:
            await consumer.close()
            raise
        self._consumer = consumer

    async def _seek(self, consumer: Consumer[bytes, bytes], minutes: float) -> None:
        if minutes <= 0:
            consumer.seek_to_beginning(*self._tps)
            return
        since_ms = int((time.time() - minutes * 60) * 1000)
        found = await consumer.offsets_for_times({tp: since_ms for tp in self._tps})
        ends = await consumer.end_offsets(self._tps)
        for tp in self._tps:
            at = found.get(tp)
            consumer.seek(tp, at.offset if at is not None else ends.get(tp, 0))

    def _open_consumer(self) -> Consumer[bytes, bytes]:
        if self._consumer is None:
            raise RuntimeError("RequestLogReader.open() first")
        return self._consumer

    async def _poll(self, analyzer: Analyzer) -> int:
        batch = await self._open_consumer().getmany(timeout_ms=POLL_MS)
        records = decode([r.value for got in batch.values() for r in got])
        if self.keep is not None:
            records = [r for r in records if self.keep(r)]
        analyzer.feed(records)
        self.read_records += len(records)
        return sum(len(got) for got in batch.values())

    async def catch_up(self, analyzer: Analyzer) -> None:
        """Feed ``analyzer`` up to the log's end offsets as they are now."""
        consumer = self._open_consumer()
        ends = await consumer.end_offsets(self._tps)
        deadline = time.monotonic() + CATCH_UP_S
        while time.monotonic() < deadline:
            behind = False
            for tp in self._tps:
                if await consumer.position(tp) < ends.get(tp, 0):
                    behind = True
                    break
            if not behind:
                return
            await self._poll(analyzer)

    async def read_for(self, analyzer: Analyzer, seconds: float) -> None:
        """Feed ``analyzer`` what comes for ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            await self._poll(analyzer)
            if time.monotonic() >= deadline:
                return

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.close()
