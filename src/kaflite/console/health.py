"""The console's Health view: the doctor's report on the cluster the console watches.

``GET /api/health`` answers what ``kaflite doctor --json`` prints: each client's health
(connections by role and broker, metadata refreshes and why, recovery, groups,
throttling) and the named findings with their evidence, from the request log
(``__kaflite_requests``). It works the same for an embedded cluster and for
``kaflite console --bootstrap``: the log is read through the Kafka protocol
(``kaflite.doctor.reader``), with the console's client properties.

``HealthWatch`` keeps one reader and one ``kaflite.doctor.Analyzer`` for the console's
life. The first ask positions the reader ``minutes`` back (10 by default, 0 for the
whole log); each ask then reads what the log gained since the last one, up to its
end offsets at that moment, and reports over everything read so far, as ``kaflite
doctor --follow`` does. Asking with another ``minutes`` starts over. The console's own
clients and ``kaflite doctor``'s are left out. When the topic does not exist (the
log is off), the answer says so and how to turn it on, and the next ask looks again.
"""

from __future__ import annotations

import asyncio
import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kaflite.cluster.request_log import REQUEST_LOG_TOPIC, RequestRecord
from kaflite.console.backend import ClientBackend, is_console
from kaflite.console.web import ApiError, Json, answer
from kaflite.doctor import Analyzer
from kaflite.doctor.reader import (
    DOCTOR_CLIENT_ID,
    RequestLogOff,
    RequestLogReader,
    how_to_enable,
)

__all__ = ["DEFAULT_MINUTES", "HealthWatch", "health_routes"]

DEFAULT_MINUTES = 10.0


def _keep(record: RequestRecord) -> bool:
    return not is_console(record.client_id) and record.client_id != DOCTOR_CLIENT_ID


class HealthWatch:
    """The doctor, kept by the console: one reader of the log and one analyzer."""

    def __init__(self, backend: ClientBackend, topic: str = REQUEST_LOG_TOPIC) -> None:
        self.backend = backend
        self.topic = topic
        self._lock = asyncio.Lock()
        self._reader: RequestLogReader | None = None
        self._analyzer: Analyzer | None = None
        self._minutes = DEFAULT_MINUTES
        self._since = 0.0          # the wall-clock time the reading started from

    async def report(self, minutes: float | None = None) -> Json:
        """The report over what was read so far, after reading what is new."""
        async with self._lock:
            if minutes is not None and minutes != self._minutes:
                await self._close()
                self._minutes = minutes
            if self._reader is None:
                reader = RequestLogReader(self.backend.config("doctor"), self.topic,
                                          keep=_keep)
                try:
                    await reader.open(self._minutes)
                except RequestLogOff:
                    return {"enabled": False, "topic": self.topic, "minutes": self._minutes,
                            "message": f"The request log topic {self.topic} does not exist "
                                       "on this cluster: the brokers do not log requests.",
                            "how_to_enable": how_to_enable()}
                self._reader, self._analyzer = reader, Analyzer()
                self._since = 0.0 if self._minutes <= 0 else time.time() - self._minutes * 60
            assert self._analyzer is not None
            await self._reader.catch_up(self._analyzer)
            report = self._analyzer.report().to_dict()
            return {"enabled": True, "topic": self.topic, "minutes": self._minutes,
                    "since": self._since, **report}

    async def _close(self) -> None:
        reader, self._reader, self._analyzer = self._reader, None, None
        if reader is not None:
            await reader.close()

    async def close(self) -> None:
        async with self._lock:
            await self._close()


async def health(request: Request) -> Response:
    """The doctor's report on the request log: health per client and the findings
    (?minutes=N: read from N minutes back, 0: the whole log; another N starts over)."""
    raw = request.query_params.get("minutes")
    minutes: float | None = None
    if raw:
        try:
            minutes = float(raw)
        except ValueError:
            raise ApiError(400, f"minutes must be a number, got {raw!r}") from None
        if minutes < 0:
            raise ApiError(400, f"minutes must be 0 or more, got {raw!r}")
    watch: HealthWatch = request.app.state.console.health
    return answer(await watch.report(minutes))


def health_routes() -> list[Route]:
    return [Route("/api/health", health)]
