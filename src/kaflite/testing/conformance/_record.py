"""Recording a client's session with a broker, through ``kaflite proxy``.

``Recorder`` is a proxy filter: it asks for every request and response to be
decoded (Produce and Fetch included) and keeps each exchange, in the order the
requests arrived, with the time each was sent relative to the first and the
proxy connection it came on. A replay (``_replay``) sends the same requests on as
many connections, at the same offsets in time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kaflite.protocol.messages import Struct
from kaflite.proxy.filters.base import Exchange, Filter

__all__ = ["Recorded", "Recorder"]


@dataclass(slots=True)
class Recorded:
    """One request a client sent, and the broker's response (None: none came)."""

    seq: int
    connection: int
    sent_at: float           # seconds since the recording's first request
    api_key: int
    version: int
    client_id: str | None
    request: Struct
    response: Struct | None = None
    answered_at: float | None = None   # when the response passed the proxy


class Recorder(Filter):
    name = "record"

    def __init__(self) -> None:
        self.exchanges: list[Recorded] = []
        self._t0: float | None = None

    def wants(self, api_key: int, version: int) -> bool:
        return True

    def on_request(self, exchange: Exchange) -> None:
        if exchange.request is None:
            return
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now
        rec = Recorded(len(self.exchanges), exchange.connection_id, now - self._t0,
                       exchange.api_key, exchange.version, exchange.client_id,
                       exchange.request)
        exchange.notes[self.name] = rec
        self.exchanges.append(rec)

    def on_response(self, exchange: Exchange) -> None:
        rec = exchange.notes.get(self.name)
        if isinstance(rec, Recorded) and self._t0 is not None:
            rec.response = exchange.response
            rec.answered_at = time.perf_counter() - self._t0
