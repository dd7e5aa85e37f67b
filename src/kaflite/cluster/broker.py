"""One broker: its listeners, the partition replicas it hosts, and its replica fetchers.

A broker learns its role for each partition from the controller
(``on_partition_change``): as leader it serves Produce and Fetch and keeps the
ISR and high watermark; as follower it runs a replica fetcher against the
leader, over a real TCP connection speaking Kafka's Fetch protocol.

``stop()`` is a graceful shutdown (leadership moves first, logs are flushed);
``kill()`` drops everything on the floor as a crashed process would, leaving the
log files exactly as they were written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kaflite.cluster import dynamic_configs
from kaflite.cluster.acl import Authorizer
from kaflite.cluster.configs import BrokerConfig, effective_topic_configs
from kaflite.cluster.controller import BrokerInfo, Controller, PartitionState, TopicState
from kaflite.cluster.fetch_session import FetchSessionCache
from kaflite.cluster.groups import GroupCoordinator
from kaflite.cluster.handlers import all_handlers
from kaflite.cluster.hw_checkpoint import HighWatermarkCheckpoint
from kaflite.cluster.listener_tls import BrokerTls
from kaflite.cluster.listeners import ListenerSpec, inter_broker_listener
from kaflite.cluster.log import LogConfig, LogManager, flush_deferred_fsyncs
from kaflite.cluster.metrics import BrokerMetrics
from kaflite.cluster.network import ServerConnection, api_versions_error_body
from kaflite.cluster.observe import CLOSED_KEPT, ConnectionRecord
from kaflite.cluster.partition import Partition
from kaflite.cluster.quotas import QuotaManager, QuotaWindows
from kaflite.cluster.quotas.replication import ReplicationQuotas
from kaflite.cluster.request_log_writer import BrokerRequestLog
from kaflite.cluster.request_log_writer import enabled as request_log_enabled
from kaflite.cluster.request_memory import RequestMemory
from kaflite.cluster.share import SharePartitionManager
from kaflite.cluster.share._coordinator import CoordinatorPersister, ShareCoordinator
from kaflite.cluster.telemetry import DEFAULT_MAX_BYTES, TelemetryManager
from kaflite.cluster.txn import TransactionCoordinator
from kaflite.protocol import errors
from kaflite.protocol.messages import ApiVersionsResponse

if TYPE_CHECKING:
    from kaflite.cluster.faults import RuleBook
    from kaflite.cluster.replication import ReplicaFetcher
    from kaflite.net.connection import SaslFactory

__all__ = ["Broker"]

BAD_INPUT_KINDS = 1000
LOG_CONFIG_CACHE = 256   # distinct topic configs parsed and kept

log = logging.getLogger("kaflite.cluster.broker")
# Partitions a periodic pass (ISR upkeep, retention) handles between two yields to the
# event loop: a pass over 20,000 partitions must not hold the loop the brokers share.
WALK_CHUNK = 256
RETENTION_INITIAL_DELAY_S = 30.0   # Kafka's log.initial.task.delay.ms


class Broker:
    def __init__(
        self,
        node_id: int,
        controller: Controller,
        config: BrokerConfig,
        data_dir: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        advertised_host: str | None = None,
        advertised_port: int | None = None,
        rack: str | None = None,
        listeners: Sequence[ListenerSpec] | None = None,
        advertised_listeners: Mapping[str, tuple[str, int]] | None = None,
    ) -> None:
        self.node_id = node_id
        self.controller = controller
        self.config = config
        self.data_dir = data_dir
        # The listeners (the first is the default one: ``host``/``port`` and the
        # advertised host/port below are its). Without any, one PLAINTEXT listener.
        self.listeners = list(listeners) if listeners else [
            ListenerSpec("PLAINTEXT", host, port, "PLAINTEXT")]
        self.host, self.port = self.listeners[0].host, self.listeners[0].port
        self.bound: dict[str, int] = {}     # listener name -> the port it listens on
        # advertised.listeners: name -> (host, port); port 0 = the bound port
        self.advertised_listeners = dict(advertised_listeners or {})
        self.inter_broker_listener = inter_broker_listener(config.props, self.listeners)
        self._advertised = (advertised_host, advertised_port)
        self.rack = rack
        self.handlers = all_handlers(config.bool("unstable.api.versions.enable"))
        # None unless authorizer.class.name is set (kaflite.cluster.acl)
        self.authorizer = Authorizer.from_config(config.props, controller.acls)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.connections: dict[int, ServerConnection] = {}
        # closed by their peers, still finishing requests read before the close
        self.draining: set[ServerConnection] = set()
        self.request_memory = RequestMemory(config.int("queued.max.request.bytes"))
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.logs: LogManager | None = None
        # replication-offset-checkpoint, written off the event loop (kaflite.cluster.hw_checkpoint)
        self.hw_checkpoint = HighWatermarkCheckpoint(
            data_dir, thread_name=f"kaflite-hw-checkpoint-{node_id}")
        self.servers: dict[str, asyncio.Server] = {}
        self.running = False
        self._tasks: list[asyncio.Task[None]] = []
        self._bad_input_logged: set[str] = set()
        self.started_at = 0.0
        self.faults: RuleBook | None = None  # the cluster's rules, set by the cluster
        # Called after every partition state change with (partition, was_leader):
        # coordinators use it to load or unload state when an internal topic's
        # leadership moves here or away.
        self.partition_hooks: list[Callable[[Partition, bool], None]] = []
        # Called after a COMMIT/ABORT marker written through WriteTxnMarkers is
        # replicated (the high watermark passed it) on a partition this broker
        # leads, with (topic, partition, producer id, producer epoch, committed):
        # the group coordinator completes transactional offset commits with it.
        self.marker_hooks: list[Callable[[str, int, int, int, bool], None]] = []
        # The coordinators, attached when the broker starts (they hook partition
        # changes before it takes any).
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        # Share groups (KIP-932): the share-partitions this broker leads, and share sessions.
        self.share: SharePartitionManager | None = None
        self.share_coordinator: ShareCoordinator | None = None     # __share_group_state
        self.fetch_sessions = FetchSessionCache()      # KIP-227, for this broker's clients
        # client telemetry (KIP-714): subscriptions are the controller's CLIENT_METRICS configs
        self.telemetry = TelemetryManager(lambda: controller.client_metrics, int(
            config.props.get("telemetry.max.bytes", DEFAULT_MAX_BYTES)))
        self._log_configs: dict[tuple[object, ...], LogConfig] = {}
        self.closed_connections: deque[ConnectionRecord] = deque(maxlen=CLOSED_KEPT)
        self.metrics = BrokerMetrics()   # counters for GET /metrics (kaflite.cluster.metrics)
        # TLS listeners, whose stores dynamic configs may change (kaflite.cluster.listener_tls)
        self.tls = BrokerTls(node_id, config.props, self.listeners,
                             lambda: controller.broker_configs, on_change=self._tls_changed,
                             inter_broker=self.inter_broker_listener)
        self._inter_broker: tuple[ssl.SSLContext | None, SaslFactory | None] | None = None
        # client quotas (kaflite.cluster.quotas): this broker's rates and throttle times
        self.quotas = QuotaManager(controller.client_quotas, QuotaWindows(
            config.int("quota.window.num"), config.int("quota.window.size.seconds") * 1000))
        # replication throttling (KIP-73, kaflite.cluster.quotas.replication)
        self.replication_quotas = ReplicationQuotas(
            node_id, self.dynamic_config, self._topic_configs, QuotaWindows(
                config.int("replication.quota.window.num"),
                config.int("replication.quota.window.size.seconds") * 1000))
        # the request log (kaflite.request.log.enable; kaflite.cluster.request_log_writer)
        self.request_log: BrokerRequestLog | None = None

    # -- addresses ---------------------------------------------------------------
    def endpoint(self, listener: str) -> tuple[str, int]:
        """The advertised (host, port) of one of this broker's listeners."""
        spec = next(s for s in self.listeners if s.name == listener)
        port = self.bound.get(listener, spec.port)
        host, adv_port = self.advertised_listeners.get(listener, (spec.host, port))
        if listener == self.listeners[0].name:
            host = self._advertised[0] or host
            adv_port = self._advertised[1] or adv_port
        return host, adv_port or port

    @property
    def endpoints(self) -> dict[str, tuple[str, int]]:
        return {s.name: self.endpoint(s.name) for s in self.listeners}

    @property
    def advertised_host(self) -> str:
        return self.endpoint(self.listeners[0].name)[0]

    @property
    def advertised_port(self) -> int:
        return self.endpoint(self.listeners[0].name)[1]

    @property
    def info(self) -> BrokerInfo:
        return BrokerInfo(self.node_id, self.advertised_host, self.advertised_port, self.rack,
                          endpoints=self.endpoints)

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs = LogManager(self.data_dir, node_id=self.node_id,
                               cluster_id=self.controller.cluster_id)
        # Opening thousands of logs reads their checkpoints, indexes and producer
        # snapshots: on a thread, so the brokers sharing this loop keep serving.
        await asyncio.to_thread(self.logs.load_all)
        self.hw_checkpoint.load(self.logs)
        loop = asyncio.get_running_loop()
        try:
            for spec in self.listeners:
                server = await loop.create_server(
                    self._protocol_factory(spec), spec.host,
                    self.bound.get(spec.name, spec.port), reuse_address=True,
                    ssl=self.ssl_context(spec))
                self.servers[spec.name] = server
                self.bound[spec.name] = server.sockets[0].getsockname()[1]
        except BaseException:
            for server in self.servers.values():
                server.close()
            self.servers.clear()
            raise
        self.port = self.bound[self.listeners[0].name]
        self.running = True
        self.started_at = time.time()
        info = self.controller.brokers.get(self.node_id)
        if info is None:
            info = self.info
        else:
            info.host, info.port, info.rack = self.advertised_host, self.advertised_port, self.rack
            info.endpoints = self.endpoints
        self.inter_broker_security()   # a bad inter-broker setup fails the start
        self.controller.register_broker(info, self)
        self.share_coordinator = ShareCoordinator(self)
        self.share = SharePartitionManager(self, CoordinatorPersister(
            self, self.share_coordinator, self.share_coordinator.config.write_timeout_ms))
        self.groups = GroupCoordinator(self)  # hooks partition changes before taking any
        self.transactions = TransactionCoordinator(self)
        await self.controller.broker_started_async(self.node_id)
        self._tasks.append(loop.create_task(self._maintain_isr()))
        self._tasks.append(loop.create_task(self._retention()))
        self._tasks.append(loop.create_task(self._checkpoint_high_watermarks()))
        if request_log_enabled(self.config.props):
            self.request_log = BrokerRequestLog(self, self.config.props)
            self.request_log.start()

    async def stop(self) -> None:
        """Graceful shutdown: hand leadership over, then close everything."""
        if not self.running:
            return
        if self.request_log is not None:   # while this broker still leads its partitions
            await self.request_log.close()
        await self.controller.broker_stopped_async(self.node_id)
        await self._checkpoint_high_watermarks_logged()
        await self._shutdown()
        if self.logs is not None:
            # flushes, producer snapshots and checkpoints of every log: off the loop
            await asyncio.to_thread(self.logs.close)
        # Leader-epoch checkpoints are fsynced in the background; a clean stop waits
        # for them (off the loop, which the other brokers share).
        await asyncio.to_thread(flush_deferred_fsyncs)

    async def kill(self) -> None:
        """Crash: stop serving at once; nothing is flushed or handed over nicely."""
        if not self.running:
            return
        await self._shutdown()
        await self.controller.broker_stopped_async(self.node_id)
        if self.logs is not None:
            self.logs.close(flush=False)

    async def _shutdown(self) -> None:
        self.running = False
        if self.request_log is not None:
            self.request_log.kill()
            self.request_log = None
        for server in self.servers.values():
            server.close()
        for conn in [*self.connections.values(), *self.draining]:
            conn.abort()
        self.fetch_sessions.clear()
        if self.share is not None:
            self.share.close()
        if self.share_coordinator is not None:
            self.share_coordinator.close()
        for coordinator in (self.groups, self.transactions):
            if coordinator is not None:
                coordinator.close()
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        for p in self.partitions.values():
            p.leader = -1
            p.wake_fetchers()
            p._fail_hw_waiters()
        self.partitions.clear()
        for server in self.servers.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)
        self.servers.clear()
        # A write in flight ends (a crash in a broker process leaves the old
        # file or the new one, never a torn one: the file is replaced atomically).
        await self.hw_checkpoint.close()

    def inter_broker_security(self) -> tuple[ssl.SSLContext | None, SaslFactory | None]:
        """How this broker connects to the others (``inter.broker.listener.name``)."""
        if self._inter_broker is None:
            from kaflite.cluster.auth import inter_broker_security

            spec = next(s for s in self.listeners if s.name == self.inter_broker_listener)
            self._inter_broker = inter_broker_security(self.tls.props(), spec)
        return self._inter_broker

    def _tls_changed(self) -> None:
        self._inter_broker = None    # new connections to other brokers use the new stores

    def _protocol_factory(self, spec: ListenerSpec) -> Callable[[], ServerConnection]:
        return lambda: ServerConnection(self, spec)

    def ssl_context(self, spec: ListenerSpec) -> ssl.SSLContext | None:
        """The TLS context of an SSL or SASL_SSL listener (None for the others)."""
        return self.tls.context(spec) if spec.tls else None

    # -- controller callbacks -------------------------------------------------------
    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None:
        if not self.running:
            return
        key = (topic.name, state.partition)
        p = self.partitions.get(key)
        if self.node_id not in state.replicas:
            if p is not None:
                self._remove_partition(p, delete=True)
            return
        if p is None:
            log_config = self.topic_log_config(topic)
            assert self.logs is not None
            plog = self.logs.get_or_create(topic.name, state.partition, topic.topic_id, log_config)
            p = Partition(self.node_id, topic.name, state.partition, topic.topic_id, plog)
            # As Kafka: a restarted replica starts from its checkpointed high watermark,
            # not 0, so that ListOffsets and Fetch do not go back while it relearns it.
            p.high_watermark = p.checkpointed_hw = self.hw_checkpoint.initial(
                key, plog.log_end_offset)
            self.partitions[key] = p
        else:
            p.log.config = self.topic_log_config(topic)
        was_leader = p.is_leader
        became_leader, _ = p.apply(state)
        for hook in self.partition_hooks:
            hook(p, was_leader)
        if p.is_leader or state.leader == -1:
            self._unfollow(p)
        else:
            self._follow(p, state.leader)
        if became_leader:
            log.debug("broker %s leads %s-%s at epoch %s", self.node_id, *key, p.leader_epoch)

    def log_preparer(self, name: str, topic_id: uuid.UUID, configs: dict[str, str],
                     partitions: list[int]) -> Callable[[], int] | None:
        logs = self.logs
        if not self.running or logs is None or not partitions:
            return None
        config = self.topic_log_config(TopicState(name, topic_id, [], dict(configs)))
        return lambda: logs.prepare(name, partitions, topic_id, config)

    def drop_prepared(self, name: str, topic_id: uuid.UUID) -> None:
        if self.logs is not None:
            self.logs.drop_prepared(name, topic_id)

    def on_topic_deleted(self, topic: TopicState) -> None:
        for p in [p for k, p in self.partitions.items() if k[0] == topic.name]:
            self._remove_partition(p, delete=True)

    def _remove_partition(self, p: Partition, delete: bool) -> None:
        self._unfollow(p)
        was_leader = p.is_leader
        p.leader = -1
        for hook in self.partition_hooks:
            hook(p, was_leader)
        p.wake_fetchers()
        p._fail_hw_waiters()
        self.partitions.pop(p.tp, None)
        if delete and self.logs is not None:
            self.logs.delete_partition(p.topic, p.index)
            self.hw_checkpoint.forget(p.tp)

    def _follow(self, p: Partition, leader: int) -> None:
        from kaflite.cluster.replication import ReplicaFetcher

        for fid, fetcher in self.fetchers.items():
            if fid != leader:
                fetcher.remove(p)
        existing = self.fetchers.get(leader)
        if existing is None:
            existing = self.fetchers[leader] = ReplicaFetcher(self, leader)
            existing.start()
        existing.add(p)

    def _unfollow(self, p: Partition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(p)

    def dynamic_config(self, name: str) -> tuple[str, str] | None:
        """Broker config ``name``'s dynamic value and source for this broker, if set."""
        return dynamic_configs.lookup(self.controller.broker_configs, self.node_id, name)

    def _topic_configs(self, name: str) -> dict[str, str] | None:
        topic = self.controller.topics.get(name)
        return None if topic is None else topic.configs

    def topic_log_config(self, topic: TopicState) -> LogConfig:
        # Built once per distinct set of topic overrides (the broker's own configs do not
        # change while it runs): a leader election at 5,000 partitions parsed it 3,300
        # times on the event loop, and at 20,000 merging it with the broker's defaults
        # alone was 1.6 s of a broker kill (issue 36).
        key = (self.controller.broker_config_changes, *topic.configs.items())
        config = self._log_configs.get(key)
        if config is None:
            values = {k: v for k, (v, _) in
                      effective_topic_configs(topic.configs, self.config,
                                              self.dynamic_config).items()
                      if v is not None}
            if len(self._log_configs) >= LOG_CONFIG_CACHE:
                self._log_configs.clear()
            config = self._log_configs[key] = LogConfig.from_props(values)
        return config

    # -- serving helpers --------------------------------------------------------------
    def leader_partition(self, topic: str, index: int, epoch: int = -1) -> Partition:
        """The partition if this broker leads it, else the error Kafka would return."""
        p = self.partitions.get((topic, index))
        if p is None:
            state = self.controller.partition(topic, index)
            if state is None:
                raise errors.UnknownTopicOrPartitionError(f"{topic}-{index}")
            if state.leader == -1:
                raise errors.LeaderNotAvailableError(f"{topic}-{index}")
            raise errors.NotLeaderOrFollowerError(f"{topic}-{index}")
        if p.leader == -1:
            raise errors.LeaderNotAvailableError(f"{topic}-{index}")
        if epoch >= 0:
            if epoch < p.leader_epoch:
                raise errors.FencedLeaderEpochError(f"{topic}-{index}")
            if epoch > p.leader_epoch:
                raise errors.UnknownLeaderEpochError(f"{topic}-{index}")
        if not p.is_leader:
            raise errors.NotLeaderOrFollowerError(f"{topic}-{index}")
        return p

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return {k: (h.min_version, h.max_version) for k, h in self.handlers.items()}

    def api_versions_v0_error(self) -> ApiVersionsResponse:
        return api_versions_error_body(self.api_versions())

    def log_bad_input(self, peer: str, why: str) -> None:
        """Log bad input once per client host and kind (a fuzzing client opens many
        connections, from as many ports); at most ``BAD_INPUT_KINDS`` are remembered."""
        key = f"{peer.rsplit(':', 1)[0]}:{why.split(':')[0]}"
        if key not in self._bad_input_logged and len(self._bad_input_logged) < BAD_INPUT_KINDS:
            self._bad_input_logged.add(key)
            log.warning("broker %s: closing connection from %s: %s", self.node_id, peer, why)

    # -- background duties -------------------------------------------------------------
    async def _led(self) -> AsyncIterator[Partition]:
        """The partitions this broker leads now, a chunk at a time (``WALK_CHUNK``); one
        removed or no longer led while the pass yielded is skipped."""
        for i, p in enumerate(list(self.partitions.values())):
            if i and not i % WALK_CHUNK:
                await asyncio.sleep(0)
            if p.is_leader and self.running and \
                    self.partitions.get((p.topic, p.index)) is p:
                yield p

    async def _maintain_isr(self) -> None:
        lag_ms = self.config.int("replica.lag.time.max.ms")
        while self.running:
            await asyncio.sleep(max(0.05, lag_ms / 4000))
            async for p in self._led():
                if p.isr_change_pending:
                    continue
                lagging = p.lagging_isr_members(lag_ms)
                if lagging:
                    self.alter_isr(p, [r for r in p.isr if r not in lagging])

    def alter_isr(self, p: Partition, isr: list[int]) -> None:
        try:
            state = self.controller.alter_isr(p.topic, p.index, self.node_id, p.leader_epoch, isr)
        except errors.KafkaError:
            self.metrics.failed_isr_updates += 1
            return
        self.metrics.isr_changed(p.isr, state.isr)
        p.isr = list(state.isr)
        p.partition_epoch = state.partition_epoch
        p.maybe_advance_hw()

    async def checkpoint_high_watermarks(self) -> bool:
        """Write every hosted partition's high watermark to the data directory's
        replication-offset-checkpoint, in the checkpoint's worker thread (the
        snapshot is taken here, on the loop). False if nothing changed since the
        last write; OSError if the write failed."""
        taken: list[tuple[Partition, int]] = []

        async def snapshot() -> dict[tuple[str, int], int]:
            # a chunk at a time (tens of thousands of partitions on the loop the brokers
            # share); each entry is a high watermark its partition had, which is all a
            # checkpoint needs
            taken.clear()
            logs = self.logs
            entries = {} if logs is None else {
                tp: hw for tp, hw in self.hw_checkpoint.unhosted.items()
                if logs.get(*tp) is not None}
            for i, (tp, p) in enumerate(list(self.partitions.items())):
                if i and not i % (4 * WALK_CHUNK):
                    await asyncio.sleep(0)
                hw = p.high_watermark
                entries[tp] = hw
                taken.append((p, hw))
            return entries

        if await self.hw_checkpoint.write(snapshot) is None:
            return False
        for p, hw in taken:
            p.checkpointed_hw = hw
        return True

    async def _checkpoint_high_watermarks_logged(self) -> None:
        try:
            await self.checkpoint_high_watermarks()
        except OSError:
            log.exception("broker %s: cannot checkpoint the high watermarks", self.node_id)

    async def _checkpoint_high_watermarks(self) -> None:
        interval = self.config.int("replica.high.watermark.checkpoint.interval.ms") / 1000
        while self.running:
            await asyncio.sleep(interval)
            await self._checkpoint_high_watermarks_logged()

    async def _retention(self) -> None:
        """Every 5 s at most: compaction and producer expiry; retention every
        ``log.retention.check.interval.ms`` (5 minutes by default, as Kafka's), the
        first check after 30 s at most (Kafka's log.initial.task.delay.ms). It once ran
        every 5 s whatever the setting, and records stamped a week ago went within
        seconds of their write, where Kafka keeps them until its check."""
        interval = self.config.int("log.retention.check.interval.ms") / 1000
        next_retention = time.monotonic() + min(interval, RETENTION_INITIAL_DELAY_S)
        while self.running:
            await asyncio.sleep(min(interval, 5.0))
            now_ms = int(time.time() * 1000)
            retention = time.monotonic() >= next_retention
            if retention:
                next_retention = time.monotonic() + interval
            # followers take the leader's log start from its Fetch responses
            async for p in self._led():
                try:
                    p.log.housekeeping(now_ms, high_watermark=p.high_watermark,
                                       retention=retention)
                except Exception:
                    log.exception("retention failed for %s-%s", p.topic, p.index)
