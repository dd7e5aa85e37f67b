"""The controller process's side of a multi-process cluster.

The ``Controller`` stays the one home of the metadata logic; this serves it to
broker processes (``kaflite.cluster.controller_client``) over one loopback TCP
connection each, in the framing of ``metadata_image``:

* a broker says hello and gets the whole metadata image;
* after every change the controller sends every broker the change's metadata
  log records, which its replica replays as KRaft brokers replay the log (so a
  change costs what it changed, not the size of the metadata), and the brokers'
  image entries that changed (a delta), then the notifications the change made for that broker
  (``on_partition_change``, ``on_topic_deleted``), as KRaft brokers replay the
  metadata log and act on the partitions they host;
* a broker's change requests (CreateTopics, AlterPartition, elections, SCRAM,
  delegation tokens, ACLs, client quotas, producer ids, its own registration and
  controlled shutdown) arrive as calls, run on the ``Controller``, and are answered
  after the delta they made;
* heartbeats (as KRaft's BrokerHeartbeat, every ``broker.heartbeat.interval.ms``)
  keep a broker alive; one silent for ``broker.session.timeout.ms`` is fenced,
  and so is one whose connection ends (a SIGKILLed process): its leaderships
  move and it leaves every ISR, through ``Controller.broker_stopped``.

The controller process calls brokers too (``call_broker``): the connection
registry, fault rules, shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from typing import cast

from kaflite.cluster import delegation_tokens, metadata_image
from kaflite.cluster.controller import Controller, PartitionState, TopicState
from kaflite.cluster.metadata_image import Frames, Json, broker_from_json, frame
from kaflite.cluster.quotas.entities import entity_from_pairs
from kaflite.protocol import errors
from kaflite.protocol.messages._generated.delegation_token_record import DelegationTokenRecord
from kaflite.protocol.messages._runtime import Struct
from kaflite.security.acl import AclBinding
from kaflite.security.scram import ScramCredential

__all__ = ["BrokerUnavailable", "ControllerServer"]

log = logging.getLogger("kaflite.cluster.controller_server")


class BrokerUnavailable(RuntimeError):
    """The broker process is not connected (not started, stopped or dead)."""


class _Channel(asyncio.Protocol):
    """One broker process's connection."""

    def __init__(self, server: ControllerServer) -> None:
        self.server = server
        self.node_id: int | None = None
        self.transport: asyncio.Transport | None = None
        self.frames = Frames()
        self.last_heartbeat = time.monotonic()
        self.calls: dict[int, asyncio.Future[object]] = {}
        self.next_call = 0
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)   # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        try:
            self.frames.feed(data)
        except ValueError:
            self.close()
            return
        pending = self.frames.pending
        while pending:
            self.server.received(self, pending.popleft())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for fut in self.calls.values():
            if not fut.done():
                fut.set_exception(BrokerUnavailable(f"broker {self.node_id} went away"))
        self.server.lost(self)

    def send(self, message: Json) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(frame(message))

    def close(self) -> None:
        self.closed = True      # nothing more is sent on it
        if self.transport is not None:
            self.transport.close()

    # the controller's Listener for this broker: notifications go after the delta
    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None:
        self.server.queue(self, {"notify": "partition", "topic": topic.name,
                                 "partition": state.partition, "state": state.to_json()})

    def on_topic_deleted(self, topic: TopicState) -> None:
        self.server.queue(self, {"notify": "deleted", "topic": topic.name,
                                 "topic_id": str(topic.topic_id)})

    def log_preparer(self, name: str, topic_id: uuid.UUID, configs: dict[str, str],
                     partitions: list[int]) -> Callable[[], int] | None:
        return None     # a broker process opens its own logs, on its own loop

    def drop_prepared(self, name: str, topic_id: uuid.UUID) -> None:
        return None


class ControllerServer:
    def __init__(self, controller: Controller, heartbeat_interval_ms: int,
                 session_timeout_ms: int) -> None:
        self.controller = controller
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.session_timeout = session_timeout_ms / 1000
        self.channels: dict[int, _Channel] = {}
        # the brokers' image entries as the broker processes have them
        self._brokers: dict[str, Json] = self._broker_entries()
        self._records: list[Struct] = []       # metadata records not sent yet
        self._queued: list[tuple[_Channel, Json]] = []
        self._flush_scheduled = False
        self._server: asyncio.Server | None = None
        self._watch: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = 0
        # a broker process proves it was started by this cluster (the port is loopback,
        # but any local user could connect to it)
        self.token = secrets.token_hex(16)
        self.registered: dict[int, asyncio.Event] = {}
        self.on_rule_hit: Callable[[list[int]], None] | None = None  # fault rules hit
        controller.on_change = self.schedule_flush
        self._unobserve = controller.observe_records(self._note_records)

    async def start(self, host: str = "127.0.0.1") -> int:
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(lambda: _Channel(self), host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._watch = self._loop.create_task(self._fence_silent())
        return self.port

    async def stop(self) -> None:
        self.controller.on_change = None
        self._unobserve()
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for ch in list(self.channels.values()):
            ch.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def registration(self, node_id: int) -> asyncio.Event:
        return self.registered.setdefault(node_id, asyncio.Event())

    # -- the metadata stream -------------------------------------------------------------
    def schedule_flush(self) -> None:
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def queue(self, channel: _Channel, message: Json) -> None:
        self._queued.append((channel, message))
        self.schedule_flush()

    def _note_records(self, records: list[Struct]) -> None:
        self._records.extend(records)

    def _broker_entries(self) -> dict[str, Json]:
        keys = ["cluster", *(f"broker/{n}" for n in self.controller.brokers)]
        return {k: v for k in keys if (v := metadata_image.entry(self.controller, k)) is not None}

    def flush(self) -> None:
        """Send every broker the metadata records made since the last flush and the
        brokers' entries that changed (fault injection changes them directly, then
        flushes), then each broker its notifications."""
        self._flush_scheduled = False
        brokers = self._broker_entries()
        delta = metadata_image.diff(self._brokers, brokers)
        self._brokers = brokers
        records, self._records = self._records, []
        rows = metadata_image.records_for_brokers(records) if records else []
        if rows or delta:
            message: Json = {"records": rows, "delta": delta}
            for ch in self.channels.values():
                ch.send(message)
        queued, self._queued = self._queued, []
        for ch, msg in queued:
            ch.send(msg)

    # -- broker connections --------------------------------------------------------------
    def received(self, ch: _Channel, msg: Json) -> None:
        if ch.node_id is None and msg.get("op") != "call":
            return      # nothing counts before the hello
        ch.last_heartbeat = time.monotonic()
        if "reply" in msg:
            fut = ch.calls.pop(int(msg["reply"]), None)
            if fut is not None and not fut.done():
                if "error" in msg:
                    fut.set_exception(RuntimeError(str(msg["error"])))
                else:
                    fut.set_result(msg.get("result"))
            return
        if msg.get("op") == "rule_hit" and self.on_rule_hit is not None:
            self.on_rule_hit([int(i) for i in msg["ids"]])
        if msg.get("op") != "call":
            return      # a heartbeat: its time is noted above
        call_id = int(msg["id"])
        try:
            result = self._run(ch, str(msg["method"]), msg.get("args") or {})
        except errors.KafkaError as exc:
            self.flush()
            ch.send({"reply": call_id, "code": exc.code, "error": str(exc)})
            return
        except (KeyError, ValueError) as exc:
            self.flush()
            ch.send({"reply": call_id, "kind": type(exc).__name__, "error": str(exc)})
            return
        except Exception as exc:   # a bug here must not leave the broker waiting
            log.exception("controller call %s from broker %s failed", msg.get("method"),
                          ch.node_id)
            self.flush()
            ch.send({"reply": call_id, "kind": type(exc).__name__, "error": str(exc)})
            return
        self.flush()
        ch.send({"reply": call_id, "result": result})

    def lost(self, ch: _Channel) -> None:
        node = ch.node_id
        if node is None or self.channels.get(node) is not ch:
            return
        del self.channels[node]
        self.controller.listeners.pop(node, None)
        info = self.controller.brokers.get(node)
        if info is not None and info.alive:
            log.warning("broker %s: connection to the controller lost; fencing it", node)
            self.controller.broker_stopped(node)
        self.flush()

    async def _fence_silent(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            now = time.monotonic()
            for ch in list(self.channels.values()):
                if now - ch.last_heartbeat > self.session_timeout:
                    log.warning("broker %s: no heartbeat for %.1f s; fencing it",
                                ch.node_id, now - ch.last_heartbeat)
                    ch.close()

    async def call_broker(self, node_id: int, method: str, args: Json | None = None,
                          timeout: float = 30) -> object:
        """Call a service of a broker process and wait for its answer."""
        ch = self.channels.get(node_id)
        if ch is None or ch.closed:
            raise BrokerUnavailable(f"broker {node_id} is not running")
        assert self._loop is not None
        ch.next_call += 1
        fut: asyncio.Future[object] = self._loop.create_future()
        ch.calls[ch.next_call] = fut
        ch.send({"call": ch.next_call, "method": method, "args": args or {}})
        return await asyncio.wait_for(fut, timeout)

    async def barrier(self) -> None:
        """Return once every connected broker has applied every change made so far
        (each connection is in order: a broker answers a ping after the delta)."""
        self.flush()
        await self.call_all("ping")

    def tell_all(self, method: str, args: Json) -> None:
        """Call every connected broker without waiting for the answers."""
        for ch in self.channels.values():
            ch.next_call += 1
            ch.send({"call": ch.next_call, "method": method, "args": args})

    async def call_all(self, method: str, args: Json | None = None) -> dict[int, object]:
        """Call every connected broker; a broker that fails to answer is left out."""
        nodes = sorted(self.channels)
        results = await asyncio.gather(*(self.call_broker(n, method, args) for n in nodes),
                                       return_exceptions=True)
        return {n: r for n, r in zip(nodes, results, strict=True)
                if not isinstance(r, BaseException)}

    # -- the calls -----------------------------------------------------------------------
    def _run(self, ch: _Channel, method: str, a: Json) -> object:
        c = self.controller
        if ch.node_id is None and not (
                method == "hello" and hmac.compare_digest(str(a.get("token")), self.token)):
            ch.close()
            raise ValueError("a broker process must say hello with its token first")
        if method == "hello":
            node = int(a["node_id"])
            old = self.channels.get(node)
            if old is not None and old is not ch:
                old.close()
            ch.node_id = node
            self.flush()
            self.channels[node] = ch
            return metadata_image.image(c)
        if method == "register_broker":
            info = broker_from_json(a["info"])
            known = c.brokers.get(info.node_id)
            if known is not None:
                info.alive, info.fenced_replication = known.alive, known.fenced_replication
            c.register_broker(info, ch)
            self.registration(info.node_id).set()
            return None
        if method == "broker_started":
            c.broker_started(int(a["node_id"]))
            return None
        if method == "broker_stopped":
            c.broker_stopped(int(a["node_id"]))
            return None
        if method == "unregister_broker":
            c.unregister_broker(int(a["node_id"]))
            return None
        if method == "allocate_producer_id":
            return c.allocate_producer_id()
        if method == "alter_scram":
            c.alter_scram([(u, ScramCredential.from_kafka(m, t)) for u, m, t in a["upserts"]],
                          [(u, m) for u, m in a["deletions"]])
            return None
        if method == "put_token":
            c.put_token(delegation_tokens.from_record(
                cast(DelegationTokenRecord, metadata_image.record_from_json(a["record"]))))
            return None
        if method == "remove_tokens":
            c.remove_tokens([str(t) for t in a["ids"]])
            return None
        if method == "create_acls":
            c.create_acls([AclBinding.from_json(row) for row in a["bindings"]])
            return None
        if method == "delete_acls":
            c.remove_acls([AclBinding.from_json(row) for row in a["bindings"]])
            return None
        if method == "alter_client_quotas":
            c.alter_client_quotas([
                (entity_from_pairs([(str(t), None if n is None else str(n)) for t, n in pairs]),
                 {str(k): float(v) for k, v in sets.items()}, set(removals))
                for pairs, sets, removals in a["changes"]])
            return None
        if method == "create_topic":
            c.create_topic(str(a["name"]), a["assignments"], dict(a["configs"]),
                           topic_id=uuid.UUID(a["topic_id"]))
            return None
        if method == "delete_topic":
            c.delete_topic(str(a["name"]))
            return None
        if method == "create_partitions":
            c.create_partitions(str(a["name"]), a["assignments"])
            return None
        if method == "set_topic_configs":
            c.set_topic_configs(str(a["name"]), dict(a["configs"]))
            return None
        if method == "set_feature":
            c.set_feature(str(a["name"]), int(a["level"]))
            return None
        if method == "set_broker_configs":
            c.set_broker_configs(str(a["name"]), dict(a["configs"]))
            return None
        if method == "set_group_configs":
            c.set_group_configs(str(a["group"]), dict(a["configs"]))
            return None
        if method == "set_client_metrics":
            c.set_client_metrics(str(a["name"]), dict(a["configs"]))
            return None
        if method == "move_leader":
            return c.move_leader(str(a["topic"]), int(a["partition"]), a.get("to"))
        if method == "preferred_election":
            return c.preferred_election(str(a["topic"]), int(a["partition"]))
        if method == "alter_isr":
            state = c.alter_isr(str(a["topic"]), int(a["partition"]), int(a["leader"]),
                                int(a["leader_epoch"]), list(a["isr"]))
            return state.to_json()
        if method == "reassign":
            c.reassign(str(a["topic"]), int(a["partition"]), a.get("target"))
            return None
        raise ValueError(f"unknown controller call {method!r}")
