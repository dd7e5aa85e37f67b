"""A confluent-kafka (librdkafka) group member polled on its own thread, for the tests
that put it in one group with kaflite's consumers, on either group protocol."""

from __future__ import annotations

import threading
import time
from typing import Any


class RdMember:
    """A confluent-kafka consumer polled on its own thread (it is not thread-safe).

    ``protocol`` is librdkafka's ``group.protocol``: ``classic`` takes the client-side
    assignor ``strategy``; ``consumer`` (KIP-848) leaves assignment to the coordinator.
    """

    def __init__(self, servers: str, group: str, topic: str, *, protocol: str = "classic",
                 strategy: str = "range") -> None:
        self.conf: dict[str, Any] = {
            "bootstrap.servers": servers, "group.id": group, "group.protocol": protocol,
            "client.id": f"rdkafka-{group}", "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 200}
        if protocol == "classic":
            self.conf.update({"partition.assignment.strategy": strategy,
                              "session.timeout.ms": 6000, "heartbeat.interval.ms": 200})
        self.topic = topic
        self.records: list[tuple[int, bytes]] = []
        self.assignment: set[int] = set()
        # (monotonic time, "assigned" | "revoked" | "lost", partitions), from its callbacks
        self.calls: list[tuple[float, str, frozenset[int]]] = []
        self.positions: dict[int, int] = {}   # partition -> next offset to fetch
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"rdkafka-{protocol}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import Consumer as RdConsumer

        # The assignment is recorded in the rebalance callbacks, which librdkafka runs in
        # poll() before it acknowledges the change to the coordinator: read after each
        # poll instead, it could still show partitions already revoked and owned by
        # another member (a test saw "two owners" that way).
        def assigned(_: Any, partitions: list[Any]) -> None:
            with self._lock:
                self.assignment |= {tp.partition for tp in partitions}
                self._record("assigned", partitions)

        def revoked(_: Any, partitions: list[Any]) -> None:
            with self._lock:
                self.assignment -= {tp.partition for tp in partitions}
                self._record("revoked", partitions)

        def lost(_: Any, partitions: list[Any]) -> None:
            with self._lock:
                self.assignment -= {tp.partition for tp in partitions}
                self._record("lost", partitions)

        try:
            consumer = RdConsumer(self.conf)
            consumer.subscribe([self.topic], on_assign=assigned, on_revoke=revoked,
                               on_lost=lost)
            try:
                while not self._stop.is_set():
                    msg = consumer.poll(0.05)
                    if msg is not None:
                        if msg.error():
                            raise RuntimeError(str(msg.error()))
                        with self._lock:
                            self.records.append((msg.partition(), msg.value()))
                    owned = consumer.assignment()
                    positions = consumer.position(owned) if owned else []
                    with self._lock:
                        self.positions = {tp.partition: tp.offset for tp in positions}
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def _record(self, kind: str, partitions: list[Any]) -> None:
        if partitions:
            self.calls.append((time.monotonic(), kind,
                               frozenset(tp.partition for tp in partitions)))

    def snapshot(self) -> tuple[set[int], list[tuple[int, bytes]]]:
        with self._lock:
            return set(self.assignment), list(self.records)

    def at(self, ends: dict[int, int]) -> bool:
        """Whether every partition it owns has been read to the offset in ``ends``."""
        with self._lock:
            return all(self.positions.get(p) == ends[p] for p in self.assignment)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)
