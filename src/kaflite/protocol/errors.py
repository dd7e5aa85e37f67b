"""Kafka's error codes as exceptions, plus the codec's own protocol errors.

``KafkaError`` subclasses are generated from the protocol's error table: one per
code, each with ``code``, ``name`` and ``retriable``. Look them up with
``error_class(code)`` (or ``code_named(name)``) or raise them with
``raise_for_code(code)``.
"""

from __future__ import annotations

from kaflite.protocol._error_codes import *  # noqa: F403
from kaflite.protocol._error_codes import ERROR_CLASSES
from kaflite.protocol._exceptions import (
    KafkaError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)

__all__ = [
    "ERROR_CLASSES",
    "KafkaError",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "UnknownErrorCode",
    "code_named",
    "error_class",
    "error_for_code",
    "raise_for_code",
]


class UnknownErrorCode(KafkaError):
    """An error code this table does not know (a newer broker, or garbage)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.name = f"UNKNOWN_ERROR_CODE_{code}"
        super().__init__(message)


def error_class(code: int) -> type[KafkaError]:
    """The exception class for a non-zero error code (``KafkaError`` if unknown)."""
    return ERROR_CLASSES.get(code, KafkaError)


_BY_NAME = {cls.name: code for code, cls in ERROR_CLASSES.items()}


def code_named(error: int | str) -> int:
    """The code of a Kafka error given by name (``not_leader-or-follower`` is fine),
    numeric string or code; ValueError for a name Kafka does not have."""
    if isinstance(error, int):
        return error
    text = error.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    code = _BY_NAME.get(text.upper().replace("-", "_"))
    if code is None:
        raise ValueError(f"unknown error {error!r}")
    return code


def error_for_code(code: int, message: str | None = None) -> KafkaError:
    """An exception instance for a non-zero error code."""
    cls = ERROR_CLASSES.get(code)
    return UnknownErrorCode(code, message) if cls is None else cls(message)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the matching ``KafkaError`` subclass unless ``code`` is 0 (NONE)."""
    if code:
        raise error_for_code(code, message)
