"""Small helpers shared by the data-path handlers."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kaflite.protocol import errors
from kaflite.protocol.records import InvalidRecordBatch

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["error_code_of", "leader_hint", "now_ms"]


def now_ms() -> int:
    return int(time.time() * 1000)


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code for an exception raised while serving a partition."""
    if isinstance(exc, errors.KafkaError):
        return exc.code
    if isinstance(exc, InvalidRecordBatch):
        cls = {c.name: c for c in errors.ERROR_CLASSES.values()}.get(exc.error_name)
        return cls.code if cls is not None else errors.CorruptMessageError.code
    return errors.UnknownServerError.code


def leader_hint(broker: Broker, topic: str, index: int) -> tuple[int, int] | None:
    """``(leader id, leader epoch)`` from the controller, for KIP-951 hints."""
    p = broker.controller.partition(topic, index)
    return None if p is None else (p.leader, p.leader_epoch)
