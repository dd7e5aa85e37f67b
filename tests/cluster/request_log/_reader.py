"""Reads ``__kaflite_requests`` (or any topic of request records) for the tests."""

from __future__ import annotations

from collections.abc import Callable

from kaflite.client import TopicPartition
from kaflite.client.sync import Admin, Consumer
from kaflite.cluster.request_log import REQUEST_LOG_TOPIC, RequestRecord
from tests.conftest import wait_for


class Reader:
    """A consumer assigned to every partition of the topic, from the beginning."""

    def __init__(self, bootstrap: str, topic: str = REQUEST_LOG_TOPIC,
                 client_id: str = "request-log-reader") -> None:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            wait_for(lambda: topic in admin.list_topics(internal=True), f"{topic} exists",
                     timeout=20)
            partitions = sorted(p.partition for p in
                                admin.describe_topics([topic])[topic].partitions)
        self.consumer: Consumer[bytes, bytes] = Consumer(
            {"bootstrap.servers": bootstrap, "client.id": client_id,
             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        tps = [TopicPartition(topic, p) for p in partitions]
        self.consumer.assign(tps)
        self.consumer.seek_to_beginning(*tps)
        self.seen: list[RequestRecord] = []

    def poll(self) -> list[RequestRecord]:
        for records in self.consumer.getmany(timeout_ms=200).values():
            self.seen += [RequestRecord.decode(bytes(r.value)) for r in records
                          if r.value is not None]
        return self.seen

    def wait(self, cond: Callable[[list[RequestRecord]], object], what: str,
             timeout: float = 20) -> list[RequestRecord]:
        wait_for(lambda: cond(self.poll()), what, timeout=timeout, interval=0.01)
        return self.seen

    def close(self) -> None:
        self.consumer.close()
