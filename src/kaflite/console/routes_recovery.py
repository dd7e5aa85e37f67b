"""``GET /api/recovery``: how each client recovered from its errors (the chaos page's
"Recovery per client").

The timelines are ``kaflite.doctor.recovery``'s; this module feeds it from the brokers'
connection registry, which every kaflite cluster keeps (the request log is opt-in): each
connection's short history (``kaflite.cluster.observe_history``: its errors, lookups and
successes), when it opened, and, for a connection that ended because its broker was
stopped or killed, that loss as a ``NETWORK_EXCEPTION`` on the last API it served, about
everything it served then (a connection that served no partition, group or transaction
loses the client nothing, and starts no episode).

The registry forgets what a broker knew when the broker is restarted (a new broker
object) and, for a cluster of processes, when its process is gone; the closed
connections it keeps are the latest ``CLOSED_KEPT`` per broker. The console's own
clients are left out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kaflite.cluster.observe import ConnectionRecord, api_name, error_name
from kaflite.cluster.observe_history import (
    group_target,
    partition_target,
    transaction_target,
)
from kaflite.console.backend import NotAvailable, is_console
from kaflite.console.web import answer, backend_of
from kaflite.doctor.recovery import NETWORK_EXCEPTION, QUIET_APIS, ClientEvents, Event, recoveries

__all__ = ["SOURCE", "client_events", "recovery_routes"]

SOURCE = ("the brokers' connection registry: each connection's recent errors, lookups and "
          "successes, kept in memory since it opened (a restarted broker starts afresh)")
TELEMETRY_APIS = frozenset({"GetTelemetrySubscriptions", "PushTelemetry"})


def _lost(info: ConnectionRecord) -> Event | None:
    """A connection its broker's stop or kill ended, as the client saw it."""
    if info.history.closed_by != "broker down" or info.closed_at is None:
        return None
    used = [(s.recent[-1], api_name(k)) for k, s in info.apis.items()
            if s.recent and api_name(k) not in QUIET_APIS | TELEMETRY_APIS]
    if not used:
        return None
    api = max(used)[1]
    targets = [partition_target(t, p) for t, p in sorted(info.partitions)]
    targets += [group_target(g) for g in sorted(info.groups | info.share_groups)]
    targets += [transaction_target(t) for t in sorted(info.transactional_ids)]
    if not targets:
        return None
    return Event("error", info.closed_at, info.broker_id, info.connection_id, api,
                 NETWORK_EXCEPTION, tuple(targets),
                 cause=f"broker {info.broker_id} went down with the connection")


def _events(info: ConnectionRecord) -> list[Event]:
    b, c, h = info.broker_id, info.connection_id, info.history
    out = [Event("connect", info.opened_at, b, c)]
    out += [Event("error", f.at, b, c, api_name(f.api_key), error_name(f.error), f.targets,
                  f.count) for f in h.failures]
    out += [Event("lookup", at, b, c, api_name(k)) for at, k in h.lookups]
    out += [Event("success", s.at, b, c, api_name(s.api_key), targets=s.targets)
            for s in h.successes]
    lost = _lost(info)
    if lost is not None:
        out.append(lost)
    return out


def client_events(infos: Iterable[ConnectionRecord]) -> list[ClientEvents]:
    """Each client's (client.id and host) events, from its connections' records."""
    events: dict[tuple[str | None, str], list[Event]] = {}
    software: dict[tuple[str | None, str], str] = {}
    for info in infos:
        if info.broker_role is not None or is_console(info.client_id):
            continue
        key = (info.client_id, info.host)
        events.setdefault(key, []).extend(_events(info))
        if info.software_name:
            software[key] = f"{info.software_name} {info.software_version or ''}".strip()
    return [ClientEvents(cid, host, software.get((cid, host)), tuple(evs))
            for (cid, host), evs in events.items()]


async def recovery(request: Request) -> Response:
    """Recovery per client: for each error episode, the error, the next lookup, the next
    new connection and the first success, with the milliseconds between them."""
    cluster = backend_of(request).cluster_object
    if cluster is None:
        raise NotAvailable("recovery per client (the connection registry)")
    registry = cluster.registry
    await registry.refresh()
    now = time.time()
    found = recoveries(client_events(registry.infos(include_replicas=False,
                                                    include_closed=True)), now)
    return answer({"source": "registry", "source_text": SOURCE, "now": now,
                   "clients": [r.to_dict() for r in found]})


def recovery_routes() -> list[Route]:
    return [Route("/api/recovery", recovery)]
