"""Small helpers shared by the data-path handlers."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kaflite.protocol import errors
from kaflite.protocol.records import InvalidRecordBatch

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["code_for_exception", "leader_hint", "now_ms"]


def now_ms() -> int:
    return int(time.time() * 1000)


def code_for_exception(exc: BaseException) -> int:
    """The Kafka error code for an exception raised while serving a partition."""
    if isinstance(exc, errors.KafkaError):
        return exc.code
    if isinstance(exc, InvalidRecordBatch):
        try:
            return errors.code_named(exc.error_name)
        except ValueError:
            return errors.CorruptMessageError.code
    return errors.UnknownServerError.code


def leader_hint(broker: Broker, topic: str, index: int) -> tuple[int, int] | None:
    """``(leader id, leader epoch)`` from the controller, for KIP-951 hints."""
    p = broker.controller.partition(topic, index)
    return None if p is None else (p.leader, p.leader_epoch)
