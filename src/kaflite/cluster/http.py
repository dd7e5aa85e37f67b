"""A small HTTP/1.1 JSON API over the registry and the fault injector (stdlib only).

It runs on the cluster's own event loop (``kaflite up --http-port N``), so every
handler sees a consistent cluster and may await broker restarts. One request per
TCP connection (``Connection: close``); bodies are JSON objects, except
``/metrics``, which Prometheus scrapes in its text format.

Read-only:

==========================  =======================================================
GET  /connections           client connections
                            (``?client_id=&broker=&replicas=1&closed=1``)
GET  /clients               per-client fan-out and cadences
GET  /cluster               brokers, topics, partitions with leader, ISR, replicas
GET  /faults                the active fault rules
GET  /metrics               Prometheus metrics (text exposition; docs/metrics.md)
==========================  =======================================================

Faults (POST, JSON body; every rule comes back with its ``id``):

==================================  ================================================
/faults/error                       {api, error, count=1, topic, partition, group,
                                    client_id, broker, level}
/faults/delay                       {api, ms, count=null, topic, group, client_id, broker}
/faults/throttle                    {ms, api, count=null, client_id, broker}
/faults/drop                        {api, count=1, ...}: drop the next requests; without
                                    ``api``: close matching connections now
/faults/deny-topic                  {topic, client_id}
/faults/clear                       {id}: remove one rule; without: remove all
/brokers/<id>/stop|kill|restart
/brokers/<id>/isolate               {isolated=true}
/leaders/move                       {topic, partition, to}
/coordinators/move                  {key, to, type="group"|"transaction"}
/groups/<group>/forget              {member_id}
/groups/<group>/bump-epoch          a consumer group's epoch (STALE_MEMBER_EPOCH)
/groups/<group>/fence-member        {member_id}: its epoch ahead (FENCED_MEMBER_EPOCH)
/records/delete                     {topic, partition, offset=-1}
==================================  ================================================

``DELETE /faults`` and ``DELETE /faults/<id>`` remove rules too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from kaflite.cluster.faults import FaultUnavailable
from kaflite.cluster.metrics import CONTENT_TYPE, ClusterCollector, registry_of, render
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster

__all__ = ["HttpApi", "HttpError"]

log = logging.getLogger("kaflite.cluster.http")

MAX_BODY = 1 << 20
Json = dict[str, Any]


class Text:
    """A response body that is not JSON."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.body, self.content_type = body, content_type


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 413: "Payload Too Large", 500: "Internal Server Error"}


class HttpApi:
    def __init__(self, cluster: Cluster, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster
        self.host, self.port = host, port
        self.server: asyncio.Server | None = None
        self.collector = ClusterCollector(cluster)
        self.metrics = registry_of(self.collector)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> HttpApi:
        self.server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)
            self.server = None

    # -- HTTP/1.1, minimal -----------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, payload = 200, None
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, sep, value = line.partition(":")
                if sep:
                    headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0") or 0)
            if length > MAX_BODY:
                raise HttpError(413, "body too large")
            raw = await reader.readexactly(length) if length else b""
            body: Json = {}
            if raw.strip():
                parsed = json.loads(raw)
                if not isinstance(parsed, dict):
                    raise HttpError(400, "the body must be a JSON object")
                body = parsed
            payload = await self.dispatch(method.upper(), target, body)
        except HttpError as exc:
            status, payload = exc.status, {"error": str(exc)}
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
            status, payload = 400, {"error": f"{type(exc).__name__}: {exc}"}
        except FaultUnavailable as exc:
            status, payload = 409, {"error": str(exc)}
        except errors.KafkaError as exc:
            status, payload = 409, {"error": f"{exc.name}: {exc}"}
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        except Exception as exc:  # a bug must not take the cluster down
            log.exception("HTTP API request failed")
            status, payload = 500, {"error": repr(exc)}
        if isinstance(payload, Text):
            data, content_type = payload.body, payload.content_type
        else:
            data = json.dumps(payload, default=str, indent=1).encode()
            content_type = "application/json"
        writer.write(f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\n"
                     f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + data)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    # -- routes ------------------------------------------------------------------------
    async def dispatch(self, method: str, target: str, body: Json) -> object:
        parts = urlsplit(target)
        path = [p for p in parts.path.split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        cluster, faults = self.cluster, self.cluster.faults
        if method == "GET":
            if path in (["connections"], ["clients"]):
                await cluster.registry.refresh()
            if path == ["connections"]:
                broker = query.get("broker")
                return [c.to_dict() for c in cluster.registry.connections(
                    include_replicas=query.get("replicas", "") in ("1", "true"),
                    client_id=query.get("client_id"),
                    broker=int(broker) if broker is not None else None,
                    include_closed=query.get("closed", "") in ("1", "true"))]
            if path == ["clients"]:
                return [c.to_dict() for c in cluster.registry.clients()]
            if path == ["cluster"]:
                return cluster_view(cluster)
            if path == ["faults"]:
                return [r.to_dict() for r in faults.rules()]
            if path == ["metrics"]:
                await self.collector.refresh()
                return Text(render(self.metrics), CONTENT_TYPE)
            raise HttpError(404, f"no route GET {parts.path}")
        if method == "DELETE" and path[:1] == ["faults"]:
            return self._clear(path[1] if len(path) > 1 else None)
        if method != "POST":
            raise HttpError(405, f"{method} is not supported")
        route = self._routes().get(tuple(path[:1] + path[2:]) if path[:1] in (
            ["brokers"], ["groups"]) else tuple(path))
        if route is None:
            raise HttpError(404, f"no route POST {parts.path}")
        return await route(path, body)

    def _routes(self) -> dict[tuple[str, ...], Callable[[list[str], Json], Awaitable[object]]]:
        return {
            ("faults", "error"): self._error,
            ("faults", "delay"): self._delay,
            ("faults", "throttle"): self._throttle,
            ("faults", "drop"): self._drop,
            ("faults", "deny-topic"): self._deny,
            ("faults", "clear"): self._clear_post,
            ("brokers", "stop"): self._broker,
            ("brokers", "kill"): self._broker,
            ("brokers", "restart"): self._broker,
            ("brokers", "isolate"): self._isolate,
            ("leaders", "move"): self._move_leader,
            ("coordinators", "move"): self._move_coordinator,
            ("groups", "forget"): self._forget,
            ("groups", "bump-epoch"): self._bump_epoch,
            ("groups", "fence-member"): self._fence_member,
            ("records", "delete"): self._delete_records,
        }

    @staticmethod
    def _scope(body: Json, *names: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            value = body.get(name)
            if value is not None:
                out[name] = int(value) if name in ("partition", "broker") else str(value)
        return out

    @staticmethod
    def _count(body: Json, default: int | None) -> int | None:
        if "count" not in body:
            return default
        return None if body["count"] is None else int(body["count"])

    async def _error(self, path: list[str], body: Json) -> object:
        rule = self.cluster.faults.inject_error(
            body.get("api"), body["error"], self._count(body, 1),
            level=body.get("level"),
            **self._scope(body, "topic", "partition", "group", "client_id", "broker"))
        return rule.to_dict()

    async def _delay(self, path: list[str], body: Json) -> object:
        rule = self.cluster.faults.delay(
            body.get("api"), int(body["ms"]), self._count(body, None),
            **self._scope(body, "topic", "partition", "group", "client_id", "broker"))
        return rule.to_dict()

    async def _throttle(self, path: list[str], body: Json) -> object:
        rule = self.cluster.faults.throttle(
            int(body["ms"]), body.get("api"), self._count(body, None),
            **self._scope(body, "client_id", "broker"))
        return rule.to_dict()

    async def _drop(self, path: list[str], body: Json) -> object:
        faults = self.cluster.faults
        if body.get("api") is None:
            scope = self._scope(body, "client_id", "broker")
            return {"dropped": await faults.drop_connections_async(**scope)}
        rule = faults.drop_requests(body["api"], self._count(body, 1),
                                    **self._scope(body, "topic", "group", "client_id", "broker"))
        return rule.to_dict()

    async def _deny(self, path: list[str], body: Json) -> object:
        return self.cluster.faults.deny_topic(str(body["topic"]),
                                              body.get("client_id")).to_dict()

    def _clear(self, rule_id: str | None) -> object:
        faults = self.cluster.faults
        if rule_id is None:
            return {"removed": faults.clear()}
        if not faults.remove(int(rule_id)):
            raise HttpError(404, f"no rule {rule_id}")
        return {"removed": 1}

    async def _clear_post(self, path: list[str], body: Json) -> object:
        rule_id = body.get("id")
        return self._clear(None if rule_id is None else str(rule_id))

    async def _broker(self, path: list[str], body: Json) -> object:
        node_id, action = int(path[1]), path[2]
        faults = self.cluster.faults
        if action == "stop":
            await faults.stop_broker_async(node_id)
        elif action == "kill":
            await faults.kill_broker_async(node_id)
        else:
            await faults.restart_broker_async(node_id)
        return {"broker": node_id, "action": action,
                "running": self.cluster.broker_running(node_id)}

    async def _isolate(self, path: list[str], body: Json) -> object:
        node_id = int(path[1])
        isolated = bool(body.get("isolated", True))
        await self.cluster.faults.isolate_replication_async(node_id, isolated)
        return {"broker": node_id, "isolated": isolated}

    async def _move_leader(self, path: list[str], body: Json) -> object:
        to = body.get("to")
        leader = self.cluster.faults.move_leader(str(body["topic"]), int(body["partition"]),
                                                 None if to is None else int(to))
        return {"topic": body["topic"], "partition": int(body["partition"]), "leader": leader}

    async def _move_coordinator(self, path: list[str], body: Json) -> object:
        to = body.get("to")
        key = str(body.get("key") or body["group"])
        key_type = str(body.get("type", "group"))
        leader = self.cluster.faults.move_coordinator(key, None if to is None else int(to),
                                                      key_type)
        topic, index, _ = self.cluster.faults.coordinator_of(key, key_type)
        return {"key": key, "topic": topic, "partition": index, "coordinator": leader}

    async def _forget(self, path: list[str], body: Json) -> object:
        group = path[1]
        forgotten = await self.cluster.faults.forget_member_async(group,
                                                                  str(body["member_id"]))
        if not forgotten:
            raise HttpError(409, f"the coordinator of {group!r} did not forget "
                                 f"{body['member_id']!r} (no group service or no such member)")
        return {"group": group, "member_id": body["member_id"], "forgotten": True}

    async def _bump_epoch(self, path: list[str], body: Json) -> object:
        group = path[1]
        moved = self.cluster.faults.bump_group_epoch(group)
        return {"group": group, "members_moved": moved}

    async def _fence_member(self, path: list[str], body: Json) -> object:
        group, member_id = path[1], str(body["member_id"])
        if not self.cluster.faults.fence_member_epoch(group, member_id):
            raise HttpError(409, f"consumer group {group!r} has no member {member_id!r}")
        return {"group": group, "member_id": member_id, "fenced": True}

    async def _delete_records(self, path: list[str], body: Json) -> object:
        start = await self.cluster.faults.delete_records_async(
            str(body["topic"]), int(body["partition"]), int(body.get("offset", -1)))
        return {"topic": body["topic"], "partition": int(body["partition"]),
                "log_start_offset": start}


def cluster_view(cluster: Cluster) -> Json:
    """Brokers, topics and partitions (leader, ISR, replicas), as JSON."""
    controller = cluster.controller
    return {
        "cluster_id": controller.cluster_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                     "alive": b.alive, "isolated": b.fenced_replication,
                     "running": cluster.broker_running(b.node_id),
                     "pid": cluster.broker_pid(b.node_id)}
                    for b in sorted(controller.brokers.values(), key=lambda b: b.node_id)],
        "topics": [{"name": t.name, "topic_id": str(t.topic_id), "internal": t.internal,
                    "partitions": [{"partition": p.partition, "leader": p.leader,
                                    "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                                    "replicas": list(p.replicas)} for p in t.partitions]}
                   for t in sorted(controller.topics.values(), key=lambda t: t.name)],
    }
