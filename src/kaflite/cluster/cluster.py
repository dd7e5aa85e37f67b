"""An embedded Kafka-compatible cluster: N brokers and a controller.

    async with Cluster(brokers=3) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})

    with Cluster(brokers=3) as cluster:   # runs its loop in a background thread
        ...

By default every broker runs on one event loop in this process. With
``processes=True`` (``kaflite up --processes``) each broker runs in its own OS
process (``kaflite.cluster.broker_process``) and this process keeps the
controller, which sends the brokers their metadata over loopback TCP
(``kaflite.cluster.controller_server``); ``cluster.brokers`` is then empty and
``cluster.processes`` holds the broker processes.

Each broker has its own TCP listener (loopback by default), node id and rack,
and keeps its partitions in its own directory under ``data_dir``. Without a
``data_dir`` the cluster lives in a temporary directory removed on exit; with
one, a restarted cluster recovers its topics and data from disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import tempfile
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

from kaflite._loop import LoopThread
from kaflite.cluster import delegation_tokens
from kaflite.cluster.broker import Broker
from kaflite.cluster.broker_process import BrokerProcess
from kaflite.cluster.configs import DEVELOPMENT_DEFAULTS, BrokerConfig, validate_topic_configs
from kaflite.cluster.controller import BrokerInfo, Controller, TopicState
from kaflite.cluster.controller_server import ControllerServer
from kaflite.cluster.faults import FaultInjector
from kaflite.cluster.listeners import (
    ListenerSpec,
    inter_broker_listener,
    parse_listeners,
    parse_protocol_map,
)
from kaflite.cluster.loop_lag import LoopLagMonitor
from kaflite.cluster.observe import ClientSnapshot, ConnectionSnapshot, Registry
from kaflite.config import ConfigError

__all__ = ["Cluster"]

T = TypeVar("T")


class _Endpoints(Protocol):
    """A broker, in this process or its own: where clients reach it."""

    @property
    def running(self) -> bool: ...

    @property
    def advertised_host(self) -> str: ...

    @property
    def advertised_port(self) -> int: ...

    def endpoint(self, listener: str) -> tuple[str, int]: ...


class Cluster:
    def __init__(
        self,
        brokers: int = 3,
        data_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        base_port: int = 0,
        racks: Sequence[str | None] | None = None,
        config: Mapping[str, object] | None = None,
        advertised_host: str | None = None,
        advertised_ports: Sequence[int] | None = None,
        cluster_id: str | None = None,
        listeners: str | None = None,
        advertised_listeners: str | None = None,
        processes: bool = False,
    ) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self._tmp: str | None = None
        if data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="kaflite-")
            data_dir = self._tmp
        self.data_dir = Path(data_dir)
        self.host = host
        self.base_port = base_port
        self.num_brokers = brokers
        self.racks = list(racks) if racks is not None else [None] * brokers
        if len(self.racks) != brokers:
            raise ValueError("racks must name one rack per broker")
        self.config = BrokerConfig.from_props({**DEVELOPMENT_DEFAULTS, **(config or {})})
        # listeners (Kafka's names; a port P is P + i on broker i, 0 any free port)
        listeners = listeners or self.config.props.get("listeners")
        advertised_listeners = (advertised_listeners
                                or self.config.props.get("advertised.listeners"))
        protocol_map = parse_protocol_map(
            self.config.props.get("listener.security.protocol.map"))
        self.listeners = parse_listeners(listeners, protocol_map, host) if listeners else [
            ListenerSpec("PLAINTEXT", host, base_port, "PLAINTEXT")]
        self.advertised = parse_listeners(advertised_listeners, protocol_map, host,
                                          "advertised.listeners") \
            if advertised_listeners else []
        unknown = {a.name for a in self.advertised} - {s.name for s in self.listeners}
        if unknown:
            raise ConfigError("advertised.listeners",
                              f"advertised.listeners names unknown listeners: {sorted(unknown)}")
        inter_broker_listener(self.config.props, self.listeners)   # validates it
        self.advertised_host = advertised_host
        self.advertised_ports = list(advertised_ports) if advertised_ports else None
        self.controller = Controller(self.data_dir, cluster_id)
        self.brokers: dict[int, Broker] = {}
        # processes=True: one OS process per broker, the controller served to them
        self.use_processes = processes
        self.processes: dict[int, BrokerProcess] = {}
        self.controller_server: ControllerServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: LoopThread | None = None   # sync mode: the loop's thread
        self.started = False
        self._token_sweep: asyncio.Task[None] | None = None
        self.faults = FaultInjector(self)  # fault injection (kaflite.cluster.faults)
        # how late the event loop runs what is due (kaflite.cluster.loop_lag)
        self.loop_lag = LoopLagMonitor()
        self.registry = Registry(self)     # the connection registry (kaflite.cluster.observe)

    # -- addresses -------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """The running brokers' addresses on the first listener."""
        return ",".join(f"{b.advertised_host}:{b.advertised_port}"
                        for b in self._handles() if b.running)

    def bootstrap(self, listener: str) -> str:
        """The running brokers' addresses on ``listener`` (a name from ``listeners``)."""
        name = listener.upper()
        return ",".join("{}:{}".format(*b.endpoint(name))
                        for b in self._handles() if b.running)

    def _handles(self) -> list[_Endpoints]:
        return list(self.processes.values()) if self.use_processes else list(
            self.brokers.values())

    @property
    def cluster_id(self) -> str:
        return self.controller.cluster_id

    def broker(self, node_id: int) -> Broker:
        return self.brokers[node_id]

    def broker_pid(self, node_id: int) -> int | None:
        """The process id of a broker process (None in one process, or not running)."""
        process = self.processes.get(node_id)
        return process.pid if process is not None else None

    def broker_running(self, node_id: int) -> bool:
        handle = (self.processes if self.use_processes else self.brokers).get(node_id)
        return handle is not None and handle.running

    # -- lifecycle (async) -----------------------------------------------------------
    async def start(self) -> Cluster:
        self._loop = asyncio.get_running_loop()
        self.loop_lag.start()
        # the controller's removal of expired delegation tokens (Kafka's is its controller's)
        self._token_sweep = self._loop.create_task(delegation_tokens.sweeper(
            self.controller, delegation_tokens.TokenSettings.from_props(self.config.props)))
        if self.use_processes:
            await self._start_processes()
            self.started = True
            return self
        for node_id in range(self.num_brokers):
            adv_port = self.advertised_ports[node_id] if self.advertised_ports else None
            advertised = {}
            for a in self.advertised:
                one = a.for_broker(node_id)
                advertised[one.name] = (one.host, one.port)
            broker = Broker(
                node_id, self.controller, self.config, self.data_dir / f"broker-{node_id}",
                advertised_host=self.advertised_host,
                advertised_port=adv_port, rack=self.racks[node_id],
                listeners=[s.for_broker(node_id) for s in self.listeners],
                advertised_listeners=advertised,
            )
            broker.faults = self.faults
            self.brokers[node_id] = broker
            # Every broker is known (and not alive) before any starts, so the
            # first one does not elect itself leader of everything.
            self.controller.brokers.setdefault(node_id, broker.info).alive = False
        for broker in self.brokers.values():
            await broker.start()
        self.started = True
        return self

    async def _start_processes(self) -> None:
        server = ControllerServer(self.controller,
                                  self.config.int("broker.heartbeat.interval.ms"),
                                  self.config.int("broker.session.timeout.ms"))
        await server.start()
        self.controller_server = server
        for node_id in range(self.num_brokers):
            self.controller.brokers.setdefault(
                node_id, BrokerInfo(node_id, self.host, 0, self.racks[node_id])).alive = False
            spec = {
                "node_id": node_id, "data_dir": str(self.data_dir / f"broker-{node_id}"),
                "listeners": [dataclasses.asdict(s.for_broker(node_id))
                              for s in self.listeners],
                "advertised": {a.name: [a.for_broker(node_id).host, a.for_broker(node_id).port]
                               for a in self.advertised},
                "props": dict(self.config.props), "rack": self.racks[node_id],
                "advertised_host": self.advertised_host,
                "advertised_port": (self.advertised_ports[node_id]
                                    if self.advertised_ports else None),
            }
            self.processes[node_id] = BrokerProcess(node_id, spec, server)
        server.on_rule_hit = self.faults.consume
        try:
            await asyncio.gather(*(p.start() for p in self.processes.values()))
        except BaseException:
            await self.stop()
            raise

    def push_rules(self) -> None:
        """Send the fault rules to every broker process (from any thread)."""
        server, loop = self.controller_server, self._loop
        if server is None or loop is None:
            return
        args = {"rules": [r.to_dict() for r in self.faults.rules()]}
        if self.can_block():     # wait until every broker applies them
            self.call(server.call_all("set_rules", args))
        else:
            server.tell_all("set_rules", args)

    async def stop(self) -> None:
        await self.loop_lag.stop()
        if self._token_sweep is not None:
            self._token_sweep.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._token_sweep
            self._token_sweep = None
        for broker in list(self.brokers.values()):
            await broker.stop()
        if self.processes:
            await asyncio.gather(*(p.stop() for p in self.processes.values()),
                                 return_exceptions=True)
        if self.controller_server is not None:
            await self.controller_server.stop()
            self.controller_server = None
        # The metadata log's fsyncs and any snapshot in progress finish before the
        # data directory is reused (or removed), waited for off the event loop.
        await asyncio.to_thread(self.controller.flush)
        self.started = False
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    async def __aenter__(self) -> Cluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- broker faults -----------------------------------------------------------------
    async def stop_broker(self, node_id: int) -> None:
        if self.use_processes:
            await self.processes[node_id].stop()
            return
        await self.brokers[node_id].stop()

    async def kill_broker(self, node_id: int) -> None:
        """Crash a broker; with processes, SIGKILL its process."""
        if self.use_processes:
            await self.processes[node_id].kill()
            return
        await self.brokers[node_id].kill()

    async def restart_broker(self, node_id: int) -> None:
        if self.use_processes:
            process = self.processes[node_id]
            await process.stop()
            await process.start()
            assert self.controller_server is not None
            await self.controller_server.call_broker(node_id, "set_rules", {
                "rules": [r.to_dict() for r in self.faults.rules()]})
            return
        old = self.brokers[node_id]
        if old.running:
            await old.stop()
        # The same ports again (clients and followers know them).
        listeners = [ListenerSpec(s.name, s.host, old.bound.get(s.name, s.port),
                                  s.security_protocol) for s in old.listeners]
        broker = Broker(node_id, self.controller, self.config, old.data_dir,
                        advertised_host=old._advertised[0],
                        advertised_port=old._advertised[1], rack=old.rack,
                        listeners=listeners, advertised_listeners=old.advertised_listeners)
        broker.faults = old.faults
        self.brokers[node_id] = broker
        await broker.start()

    # -- admin shortcuts -------------------------------------------------------------
    def _on_loop(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the cluster's loop: controller changes must happen there."""
        if self._loop_thread is None or self._loop_thread.in_loop():
            return fn()

        async def call() -> T:
            return fn()

        return self._run(call())

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Mapping[str, str] | None = None,
                     assignments: list[list[int]] | None = None) -> TopicState:
        """Create a topic directly through the controller (no client needed)."""
        valid = validate_topic_configs(dict(configs or {}))

        def create() -> TopicState:
            plan = assignments or self.controller.assign_replicas(partitions, replication_factor)
            return self.controller.create_topic(name, plan, valid, topic_id=uuid.uuid4())

        topic = self._on_loop(create)
        self._reached_brokers()
        return topic

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        """Move a partition's leadership to ``to`` or to any other ISR member."""
        leader = self._on_loop(lambda: self.controller.move_leader(topic, partition, to))
        self._reached_brokers()
        return leader

    def _reached_brokers(self) -> None:
        """With broker processes, from a thread that may wait: return once every broker
        process has applied the controller's latest change (as in one process)."""
        if self.controller_server is not None and self.can_block():
            self.call(self.controller_server.barrier())

    # -- observation -----------------------------------------------------------------
    def connections(self, include_replicas: bool = False, client_id: str | None = None,
                    broker: int | None = None, include_closed: bool = False
                    ) -> list[ConnectionSnapshot]:
        """Every open client connection of every broker, with its roles and stats."""
        if self.use_processes:
            self.call(self.registry.refresh())
        return self._on_loop(lambda: self.registry.connections(
            include_replicas, client_id, broker, include_closed))

    def clients(self, include_closed: bool = False) -> list[ClientSnapshot]:
        """Per-client (client.id + host) fan-out and measured cadences (with
        ``include_closed``, the latest closed connections count too)."""
        if self.use_processes:
            self.call(self.registry.refresh())
        return self._on_loop(lambda: self.registry.clients(include_closed))

    # -- sync façade -------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        assert self._loop_thread is not None, "not started as a sync context manager"
        return self._loop_thread.run(coro, timeout)

    def serve_sync_on(self, loop_thread: LoopThread | None) -> None:
        """Run this cluster's sync façade on ``loop_thread``: a cluster that an owner
        started on its own loop (``kaflite.cluster.replace``)."""
        self._loop_thread = loop_thread

    def can_block(self) -> bool:
        """May the caller wait for the cluster's loop? (sync mode, from another thread)"""
        return self._loop_thread is not None and not self._loop_thread.in_loop()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        """Run a coroutine on the cluster's loop from another thread (sync mode)."""
        return self._run(coro, timeout)

    def __enter__(self) -> Cluster:
        self._loop_thread = LoopThread("kaflite-cluster")
        self._loop = self._loop_thread.loop
        self._run(self.start())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._run(self.stop())
        finally:
            assert self._loop_thread is not None
            self._loop_thread.stop()
