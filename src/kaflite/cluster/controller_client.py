"""A broker process's view of the controller: a replica fed over the wire.

``RemoteController`` is a ``Controller`` whose state is a replica of the
controller process's (``kaflite.cluster.controller_server``): it adopts the
records the controller sends (``metadata_image.apply``), so a broker reads
topics, partitions, brokers, configs, credentials and ACLs locally, as a KRaft
broker reads its metadata image. Every change is a call to the controller
instead: the methods that change metadata are sent there, run by the one
``Controller`` (the one home of the metadata logic), and return once the
controller has answered. The answer comes after the delta the change made, on
the same connection, so a broker reads its own writes.

The calls are synchronous, as the in-process controller's are, so that the
handlers stay as they are: they block the broker's loop for one loopback round
trip, which only metadata changes pay (topic creation, ISR changes, elections),
never Produce or Fetch. The controller's notifications (``on_partition_change``,
``on_topic_deleted``) arrive on the same connection and are handed to the broker
in order, also while a call waits for its answer.

The controller process calls the broker too (the connection registry, fault
rules, shutdown): ``services`` maps such a call's method to its implementation.
When the connection ends the controller is gone, and the broker process exits.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from kaflite.cluster import metadata_image
from kaflite.cluster.controller import (
    BrokerInfo,
    Controller,
    Listener,
    PartitionState,
    TopicState,
)
from kaflite.cluster.delegation_tokens import TokenInfo
from kaflite.cluster.delegation_tokens import record as token_record
from kaflite.cluster.metadata_image import Frames, Json, broker_json, frame
from kaflite.cluster.quotas.entities import Entity
from kaflite.protocol import errors
from kaflite.security.acl import AclBinding, AclBindingFilter
from kaflite.security.scram import ScramCredential

__all__ = ["ControllerGone", "RemoteController"]

log = logging.getLogger("kaflite.cluster.controller_client")

CALL_TIMEOUT_S = 30.0
Service = Callable[[Json], object]   # returns a JSON value, or an awaitable of one


class ControllerGone(ConnectionError):
    """The connection to the controller process ended."""


class RemoteController(Controller):
    def __init__(self, host: str, port: int, node_id: int, token: str) -> None:
        super().__init__(None)
        self.node_id = node_id
        self._sock = socket.create_connection((host, port), timeout=CALL_TIMEOUT_S)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._frames = Frames()
        self._replies: dict[int, Json] = {}
        self._next_id = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.services: dict[str, Service] = {}
        self.gone = asyncio.Event()
        self.closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        # the image, before any broker work starts
        reply = self._call("hello", {"node_id": node_id, "token": token})
        metadata_image.apply(self, reply)

    # -- the connection --------------------------------------------------------------
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the controller's messages on ``loop`` from now on."""
        self._loop = loop
        loop.add_reader(self._sock.fileno(), self._readable)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self.gone.set()

    def _readable(self) -> None:
        try:
            self._read()
            self._drain()
        except (OSError, ControllerGone, ValueError) as exc:
            log.warning("broker %s: controller connection ended: %s", self.node_id, exc)
            self.close()

    def _read(self) -> None:
        data = self._sock.recv(1 << 20)
        if not data:
            raise ControllerGone("the controller closed the connection")
        self._frames.feed(data)

    def _drain(self) -> None:
        pending = self._frames.pending
        while pending:
            self._dispatch(pending.popleft())

    def send(self, message: Json) -> None:
        if self.closed:
            raise ControllerGone("no controller connection")
        self._sock.sendall(frame(message))

    def _dispatch(self, msg: Json) -> None:
        """Handle one message; a failure is logged, and the stream goes on."""
        try:
            self._handle(msg)
        except Exception:
            log.exception("broker %s: handling %s from the controller failed", self.node_id,
                          next(iter(msg), "?"))

    def _handle(self, msg: Json) -> None:
        if "reply" in msg:
            self._replies[int(msg["reply"])] = msg
        elif "records" in msg:
            metadata_image.apply_records(self, msg["records"])
            metadata_image.apply(self, msg["delta"])
        elif "delta" in msg:
            metadata_image.apply(self, msg["delta"])
        elif "notify" in msg:
            self._notified(msg)
        elif "call" in msg:
            self._serve(msg)

    def _notified(self, msg: Json) -> None:
        listener = self.listeners.get(self.node_id)
        if listener is None:
            return
        name = str(msg["topic"])
        if msg["notify"] == "deleted":
            listener.on_topic_deleted(TopicState(name, uuid.UUID(msg["topic_id"]), []))
            return
        topic = self.topics.get(name)
        if topic is not None:
            state = metadata_image.partition_from_json(name, int(msg["partition"]),
                                                       msg["state"])
            listener.on_partition_change(topic, state)

    def _serve(self, msg: Json) -> None:
        """A call from the controller process: run its service, answer it."""
        call_id = int(msg["call"])
        service = self.services.get(str(msg["method"]))
        if service is None:
            self.send({"reply": call_id, "error": f"no service {msg['method']!r}"})
            return
        try:
            result = service(msg.get("args") or {})
        except Exception as exc:   # the caller gets the error, the broker keeps serving
            self.send({"reply": call_id, "error": f"{type(exc).__name__}: {exc}"})
            return
        if not isinstance(result, Awaitable):
            self.send({"reply": call_id, "result": result})
            return

        async def finish(awaitable: Awaitable[object]) -> None:
            try:
                value = await awaitable
            except Exception as exc:
                self.send({"reply": call_id, "error": f"{type(exc).__name__}: {exc}"})
                return
            if not self.closed:
                self.send({"reply": call_id, "result": value})

        assert self._loop is not None
        task = self._loop.create_task(finish(result))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _call(self, method: str, args: Json) -> Any:
        """Call the controller and wait for its answer, handling what arrives meanwhile."""
        self._next_id += 1
        call_id = self._next_id
        self.send({"op": "call", "id": call_id, "method": method, "args": args})
        deadline = time.monotonic() + CALL_TIMEOUT_S
        pending = self._frames.pending
        while call_id not in self._replies:
            if pending:
                self._dispatch(pending.popleft())
                continue
            if time.monotonic() > deadline:
                raise errors.RequestTimedOutError(f"controller call {method}")
            try:
                self._read()
            except (OSError, ControllerGone) as exc:
                self.close()
                raise errors.NotControllerError(f"controller unreachable: {exc}") from exc
        if pending and self._loop is not None:
            self._loop.call_soon(self._drain)
        reply = self._replies.pop(call_id)
        if "error" in reply:
            _raise(reply)
        return reply.get("result")

    def heartbeat(self) -> None:
        """BrokerHeartbeat: tell the controller this broker is alive."""
        self.send({"op": "heartbeat"})

    # -- what changes metadata: sent to the controller ---------------------------------
    def save(self) -> None:
        """Nothing to persist: the controller process keeps the metadata."""

    def register_broker(self, info: BrokerInfo, listener: Listener) -> None:
        self.listeners[info.node_id] = listener
        self._call("register_broker", {"info": broker_json(info)})

    def broker_started(self, node_id: int) -> None:
        self._call("broker_started", {"node_id": node_id})

    def broker_stopped(self, node_id: int) -> None:
        self._call("broker_stopped", {"node_id": node_id})

    def unregister_broker(self, node_id: int) -> None:
        self._call("unregister_broker", {"node_id": node_id})

    async def unregister_broker_async(self, node_id: int) -> None:
        self.unregister_broker(node_id)

    # the controller process works through the partitions; this broker only asks
    async def broker_started_async(self, node_id: int) -> None:
        self.broker_started(node_id)

    async def broker_stopped_async(self, node_id: int) -> None:
        self.broker_stopped(node_id)

    def allocate_producer_id(self) -> int:
        return int(self._call("allocate_producer_id", {}))

    def alter_scram(self, upserts: list[tuple[str, ScramCredential]],
                    deletions: list[tuple[str, str]]) -> None:
        self._call("alter_scram", {
            "upserts": [[user, c.mechanism, c.to_kafka()] for user, c in upserts],
            "deletions": [list(d) for d in deletions]})

    def put_token(self, info: TokenInfo) -> None:
        self._call("put_token", {"record": metadata_image.record_json(token_record(info))})

    def remove_tokens(self, token_ids: list[str]) -> None:
        self._call("remove_tokens", {"ids": list(token_ids)})

    def create_acls(self, bindings: list[AclBinding]) -> None:
        self._call("create_acls", {"bindings": [b.to_json() for b in bindings]})

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        # The replica says which bindings each filter matches; the controller deletes
        # exactly those (a binding added meanwhile elsewhere is not deleted by surprise).
        matched = [self.acls.describe(f) for f in filters]
        if any(matched):
            self._call("delete_acls", {"bindings": [b.to_json() for m in matched for b in m]})
        return matched

    def alter_client_quotas(self, changes: list[tuple[Entity, dict[str, float], set[str]]]
                            ) -> None:
        self._call("alter_client_quotas", {"changes": [
            [[list(pair) for pair in entity], sets, sorted(removals)]
            for entity, sets, removals in changes]})

    def create_topic(self, name: str, assignments: list[list[int]],
                     configs: dict[str, str] | None = None,
                     topic_id: uuid.UUID | None = None) -> TopicState:
        self._call("create_topic", {"name": name, "assignments": assignments,
                                    "configs": dict(configs or {}),
                                    "topic_id": str(topic_id or uuid.uuid4())})
        return self.topics[name]

    def delete_topic(self, name: str) -> None:
        self._call("delete_topic", {"name": name})

    def create_partitions(self, name: str, new_assignments: list[list[int]]) -> None:
        self._call("create_partitions", {"name": name, "assignments": new_assignments})

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._call("set_topic_configs", {"name": name, "configs": dict(configs)})

    def set_broker_configs(self, name: str, configs: dict[str, str]) -> None:
        self._call("set_broker_configs", {"name": name, "configs": dict(configs)})

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        self._call("set_group_configs", {"group": group, "configs": dict(configs)})

    def set_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        self._call("set_client_metrics", {"name": name, "configs": dict(configs)})

    def set_feature(self, name: str, level: int) -> None:
        self._call("set_feature", {"name": name, "level": level})

    def move_leader(self, topic_name: str, partition: int, to: int | None = None) -> int:
        return int(self._call("move_leader", {"topic": topic_name, "partition": partition,
                                              "to": to}))

    def preferred_election(self, topic_name: str, partition: int) -> bool:
        return bool(self._call("preferred_election", {"topic": topic_name,
                                                      "partition": partition}))

    def alter_isr(self, topic_name: str, partition: int, leader: int, leader_epoch: int,
                  isr: list[int]) -> PartitionState:
        state = self._call("alter_isr", {"topic": topic_name, "partition": partition,
                                         "leader": leader, "leader_epoch": leader_epoch,
                                         "isr": isr})
        return metadata_image.partition_from_json(topic_name, partition, state)

    def reassign(self, topic_name: str, partition: int, target: list[int] | None) -> None:
        self._call("reassign", {"topic": topic_name, "partition": partition, "target": target})


def _raise(reply: Json) -> None:
    code = reply.get("code")
    message = str(reply.get("error"))
    if code is not None:
        raise errors.error_for_code(int(code), message)
    kind = reply.get("kind")
    if kind == "KeyError":
        raise KeyError(message)
    if kind == "ValueError":
        raise ValueError(message)
    raise RuntimeError(f"controller: {message}")

