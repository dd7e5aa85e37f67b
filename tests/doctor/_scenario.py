"""Hand-made request log records for the analyzer's tests: a clock and a record maker."""

from __future__ import annotations

from kaflite.cluster.observe import api_name
from kaflite.cluster.request_log import RequestRecord

PRODUCE, FETCH, METADATA, OFFSET_COMMIT, FIND_COORDINATOR = 0, 1, 3, 8, 10
JOIN_GROUP, HEARTBEAT, SYNC_GROUP, API_VERSIONS, CONSUMER_GROUP_HEARTBEAT = 11, 12, 14, 18, 68
T0 = 1_700_000_000.0


class Scenario:
    """Records of one or more clients, in time order (``at`` moves the clock)."""

    def __init__(self) -> None:
        self.now = T0
        self.records: list[RequestRecord] = []

    def at(self, seconds: float) -> Scenario:
        """Set the clock to ``seconds`` after the start."""
        self.now = T0 + seconds
        return self

    def add(self, api_key: int, *, client: str = "app", broker: int = 0, conn: int = 1,
            host: str = "10.0.0.1", partitions: tuple[str, ...] = (),
            errors: dict[str, int] | None = None, roles: tuple[str, ...] = ("bootstrap",),
            group: str | None = None, generation: int | None = None,
            latency_ms: float = 1.0, throttle_ms: int = 0, source: str = "broker",
            topics: tuple[str, ...] | None = None, dt: float = 0.0) -> RequestRecord:
        self.now += dt
        errs = errors or {}
        record = RequestRecord(
            timestamp=self.now, source=source, broker=broker, listener="PLAINTEXT",
            connection_id=conn, peer=f"{host}:{40000 + conn}", client_id=client,
            software_name="librdkafka", software_version="2.5.0", principal="User:ANONYMOUS",
            api_key=api_key, api=api_name(api_key), version=1, roles=list(roles),
            topics=list(topics if topics is not None
                        else dict.fromkeys(p.rsplit("-", 1)[0] for p in partitions)),
            partitions=list(partitions), partition_count=len(partitions),
            error_code=1 if errs else 0, errors=errs, latency_ms=latency_ms,
            throttle_ms=throttle_ms, group=group, generation=generation)
        self.records.append(record)
        return record
