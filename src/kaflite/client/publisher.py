"""kaflite's own records to a topic, in batches, off the caller's path.

The proxy's request log (``kaflite.proxy.request_log``) and a client's own events
(``events.topic``, ``kaflite.client.events``) are written the same way: the caller
adds a typed record (anything with ``encode() -> (key, value)``) to a bounded
buffer, which never blocks (a record that does not fit is dropped and counted),
and a task sends what is buffered every ``flush_s`` with a producer of its own,
created on ``start()`` in the caller's event loop. ``close()`` sends what is left.

The publisher's producer is a client of its own: its requests go straight to the
cluster it writes to, and its events are not published, so nothing recurses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kaflite.client.producer import Producer

__all__ = ["Encodable", "TopicPublisher"]

log = logging.getLogger("kaflite.client.publisher")


class Encodable(Protocol):
    def encode(self) -> tuple[bytes, bytes]: ...


class TopicPublisher:
    """A bounded buffer of records and the task that sends them to ``topic``."""

    def __init__(self, config: Mapping[str, object], topic: str, *, capacity: int = 10_000,
                 flush_s: float = 0.5, partitions: int = 1,
                 client_id: str = "kaflite-publisher") -> None:
        self.config = {"client.id": client_id, "linger.ms": 5, "acks": 1,
                       "enable.idempotence": False, **config}
        self.topic = topic
        self.capacity = max(1, capacity)
        self.flush_s = flush_s
        self.partitions = partitions
        self._items: deque[Encodable] = deque()
        self.added = self.dropped = self.written = self.failed = 0
        self._producer: Producer[bytes, bytes] | None = None
        self._task: asyncio.Task[None] | None = None

    def add(self, item: Encodable) -> bool:
        """Buffer ``item``; False (and counted) if the buffer is full."""
        if len(self._items) >= self.capacity:
            self.dropped += 1
            return False
        self._items.append(item)
        self.added += 1
        return True

    def __len__(self) -> int:
        return len(self._items)

    def stats(self) -> dict[str, int]:
        return {"buffered": len(self._items), "capacity": self.capacity, "added": self.added,
                "dropped": self.dropped, "written": self.written, "failed": self.failed}

    async def start(self) -> None:
        if self._task is not None:
            return
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _open(self) -> Producer[bytes, bytes]:
        from kaflite.client import Admin, NewTopic, Producer
        from kaflite.protocol import errors

        producer = self._producer
        if producer is None:
            admin_config = {k: v for k, v in self.config.items()
                            if k not in ("linger.ms", "acks", "enable.idempotence")}
            async with Admin(admin_config) as admin:
                with contextlib.suppress(errors.TopicAlreadyExistsError):
                    await admin.create_topics([NewTopic(self.topic, self.partitions, -1)])
            producer = await Producer[bytes, bytes](self.config).start()
            self._producer = producer
        return producer

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception as exc:   # the cluster is away: the buffer bounds what waits
                log.warning("cannot publish to %s: %s", self.topic, exc)

    async def flush(self, timeout: float = 10.0) -> int:
        """Send what is buffered and wait for it; the number of records sent."""
        if not self._items:
            return 0
        producer = await self._open()
        items = [self._items.popleft() for _ in range(len(self._items))]
        sent = 0

        def delivered(err: BaseException | None, _: object) -> None:
            if err is None:
                self.written += 1
            else:
                self.failed += 1

        for item in items:
            key, value = item.encode()
            try:
                producer.produce(self.topic, value, key=key, on_delivery=delivered)
                sent += 1
            except Exception:    # BufferFull: the producer has all it can hold
                self.dropped += 1
        await producer.flush(timeout)
        return sent

    async def close(self) -> None:
        """Stop the task, send what is left, close the producer."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush()
        except Exception as exc:
            log.warning("cannot publish the last records to %s: %s", self.topic, exc)
        if self._producer is not None:
            await self._producer.close()
            self._producer = None
