"""Connection records across processes: a broker process sends its registry rows
(``ConnectionRecord``) to the controller process as JSON, and the controller
process's ``Registry`` rebuilds them to aggregate, as it does in one process.
Timestamps in ``recent`` are ``time.monotonic()`` values, one clock for every
process of the machine."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict

from kaflite.cluster.metadata_image import Json
from kaflite.cluster.observe import RING, ApiStats, ConnectionRecord
from kaflite.cluster.observe_history import History
from kaflite.cluster.quotas.manager import Usage

__all__ = ["record_from_json", "record_to_json"]


def record_to_json(r: ConnectionRecord) -> Json:
    return {
        "connection_id": r.connection_id, "broker_id": r.broker_id, "peer": r.peer,
        "client_id": r.client_id, "software_name": r.software_name,
        "software_version": r.software_version, "principal": r.principal,
        "opened_at": r.opened_at, "last_activity": r.last_activity, "bytes_in": r.bytes_in,
        "bytes_out": r.bytes_out, "replica_id": r.replica_id,
        "apis": {str(k): [s.count, s.total_ms, s.max_ms, {str(c): n for c, n in s.errors.items()},
                          list(s.recent)] for k, s in r.apis.items()},
        "partitions": [[t, p] for t, p in r.partitions], "groups": sorted(r.groups),
        "transactional_ids": sorted(r.transactional_ids), "closed_at": r.closed_at,
        "listener": r.listener, "security_protocol": r.security_protocol,
        "sasl_mechanism": r.sasl_mechanism, "authenticated_at": r.authenticated_at,
        "reauthentications": r.reauthentications,
        "session_expires_at": r.session_expires_at,
        "quotas": {k: asdict(u) for k, u in r.quotas.items()},
        "throttle_time_ms": r.throttle_time_ms, "throttles": r.throttles,
        "throttled_ms_total": r.throttled_ms_total,
        "requests_while_muted": r.requests_while_muted,
        "share_groups": sorted(r.share_groups),
        "share_partitions": [[t, p] for t, p in r.share_partitions],
        "client_instance_id": r.client_instance_id, "telemetry": dict(r.telemetry),
        "telemetry_pushes": r.telemetry_pushes, "telemetry_at": r.telemetry_at,
        "history": r.history.to_json(),
    }


def record_from_json(d: Json) -> ConnectionRecord:
    apis = {int(k): ApiStats(int(count), float(total), float(most),
                             {int(c): int(n) for c, n in errs.items()},
                             deque(recent, maxlen=RING))
            for k, (count, total, most, errs, recent) in d["apis"].items()}
    return ConnectionRecord(
        connection_id=int(d["connection_id"]), broker_id=int(d["broker_id"]),
        peer=str(d["peer"]), client_id=d["client_id"], software_name=d["software_name"],
        software_version=d["software_version"], principal=str(d["principal"]),
        opened_at=float(d["opened_at"]), last_activity=float(d["last_activity"]),
        bytes_in=int(d["bytes_in"]), bytes_out=int(d["bytes_out"]), apis=apis,
        replica_id=d["replica_id"], partitions={(str(t), int(p)) for t, p in d["partitions"]},
        groups=set(d["groups"]), transactional_ids=set(d["transactional_ids"]),
        closed_at=d["closed_at"], listener=str(d["listener"]),
        security_protocol=str(d["security_protocol"]), sasl_mechanism=d["sasl_mechanism"],
        authenticated_at=d["authenticated_at"], reauthentications=int(d["reauthentications"]),
        session_expires_at=d["session_expires_at"],
        quotas={str(k): Usage(float(u["limit"]), float(u["rate"]), str(u["entity"]),
                              int(u["throttle_time_ms"])) for k, u in d["quotas"].items()},
        throttle_time_ms=int(d["throttle_time_ms"]), throttles=int(d["throttles"]),
        throttled_ms_total=int(d["throttled_ms_total"]),
        requests_while_muted=int(d["requests_while_muted"]),
        share_groups=set(d.get("share_groups", [])),
        share_partitions={(str(t), int(p)) for t, p in d.get("share_partitions", [])},
        client_instance_id=d.get("client_instance_id"),
        telemetry={str(k): float(v) for k, v in d.get("telemetry", {}).items()},
        telemetry_pushes=int(d.get("telemetry_pushes", 0)),
        telemetry_at=d.get("telemetry_at"),
        history=History.from_json(d.get("history")),
    )
