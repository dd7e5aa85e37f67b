"""Base exception classes of the codec and of Kafka's error codes.

Two families live here and must not be confused:

* ``ProtocolError`` is raised by kaflite's codec when bytes cannot be decoded
  (``RemoteProtocolError``: the peer or the disk sent something malformed) or a
  value cannot be encoded (``LocalProtocolError``: our own caller asked for
  something the wire format cannot carry). The split follows h11: a remote error
  usually means "close the connection", a local one is a bug in the caller.
* ``KafkaError`` stands for the error *codes* that Kafka puts in responses. The
  generated module ``_error_codes`` defines one subclass per code.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """The Kafka wire format was violated."""


class RemoteProtocolError(ProtocolError):
    """Bytes received (or read from disk) are not valid Kafka protocol."""


class LocalProtocolError(ProtocolError):
    """A value handed to the encoder cannot be represented on the wire."""


class KafkaError(Exception):
    """An error code returned by a Kafka broker (or by kaflite's own broker)."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    # A Produce partition's rejected records (KIP-467): (index in the batch, why)
    record_errors: tuple[tuple[int, str], ...] = ()

    def __init__(self, message: str | None = None) -> None:
        self.message = message
        super().__init__(f"[{self.name}] {message}" if message else self.name)
