"""Fault injection: break the cluster on purpose, the way Kafka breaks, and watch clients recover.

``cluster.faults`` is a ``FaultInjector``. Built like franz-go's kfake control
hooks: request-level faults are rules (``Rule``) that match the next N requests
(or every request until removed), and each rule is visible (``rules()``) and
removable (``remove(id)``, ``clear()``). The rules act inside the brokers'
connections (``_inject``), so every API gets its error "as Kafka returns it" on
the wire, at the level Kafka reports it.

Cluster-level faults act on the real machinery instead:

=============================  ==========================================================
``stop/kill/restart_broker``   graceful shutdown, crash, restart (same data directory)
``move_leader``                a partition's leadership moves to a named or any ISR member
``move_coordinator``           a group's (or transactional id's) coordinator moves, by
                               moving the leadership of its ``__consumer_offsets``
                               (``__transaction_state``) partition
``forget_member``              the coordinator forgets a member: the next request from it
                               gets UNKNOWN_MEMBER_ID
``isolate_replication``        a broker neither fetches from leaders nor is fetched from
``drop_connections``           close client connections now
``delete_records``             move a partition's log start: a consumer behind it gets
                               OFFSET_OUT_OF_RANGE and applies ``auto.offset.reset``
``deny_topic``                 an ACL denial: TOPIC_AUTHORIZATION_FAILED on Metadata (topic
                               level) and on Produce/Fetch/... (partition level)
=============================  ==========================================================

The recovery table of the seed, and how to produce each error:

=============================  ==========================================================
NOT_LEADER_OR_FOLLOWER         ``inject_error("Produce", ...)`` or ``move_leader``
LEADER_NOT_AVAILABLE           ``inject_error`` (Metadata/Produce/Fetch) or kill every ISR
                               member
NOT_COORDINATOR                ``inject_error("Heartbeat", ...)`` or ``move_coordinator``
COORDINATOR_LOAD_IN_PROGRESS   ``inject_error`` on a group API (also while a moved
                               coordinator loads)
ILLEGAL_GENERATION             ``inject_error("Heartbeat"/"OffsetCommit"/"SyncGroup", ...)``
UNKNOWN_MEMBER_ID              ``forget_member`` or ``inject_error``
FENCED_INSTANCE_ID             ``inject_error`` on a static member's group API, or a second
                               instance with the same ``group.instance.id``
STALE_MEMBER_EPOCH             ``bump_group_epoch`` (a KIP-848 group): members move to a new
                               epoch as if its heartbeat answer was lost; their next commit
                               with the old epoch is stale
FENCED_MEMBER_EPOCH            ``fence_member_epoch``: the coordinator's epoch of a member
                               runs two steps ahead of the member's; or ``inject_error``
FENCED_STATE_EPOCH             ``bump_share_state_epoch``: a share-partition's state epoch
                               moves on at the share coordinator; the leader's next write
                               is fenced and it reloads (share groups)
(a lock expiring)              ``expire_share_locks``: a share group's records on a
                               partition are released now and delivered again
INVALID_RECORD_STATE,          ``inject_error("ShareAcknowledge"/"ShareFetch", ...)``; also
SHARE_SESSION_NOT_FOUND,       naturally (acknowledging what is not held, a stale session
INVALID_SHARE_SESSION_EPOCH    epoch, a session the broker does not know)
OFFSET_OUT_OF_RANGE            ``delete_records`` (naturally), or ``inject_error("Fetch")``
TOPIC_AUTHORIZATION_FAILED     ``deny_topic``
=============================  ==========================================================

Thread-safety: rules are guarded by a lock and may be changed from any thread.
Operations on brokers and the controller run on the cluster's loop; from another
thread (a ``with Cluster()`` block) they are sent there and waited for. On the
loop itself, await the ``*_async`` variants.

The group coordinator is the broker's ``broker.groups``.
``forget_member`` calls its ``forget_member(group_id: str, member_id: str) -> bool``
(remove the member as if its session expired, without a rebalance notice to it);
while no such service is registered it returns False.
"""

from __future__ import annotations

import uuid
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from kaflite.cluster._inject import Rule
from kaflite.cluster.internal_topics import OFFSETS, SHARE_KEY, TRANSACTIONS, find_coordinator
from kaflite.cluster.rules import RuleBook, api_key_of
from kaflite.cluster.share._state import state_key
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster
    from kaflite.cluster.metadata_image import Json
    from kaflite.cluster.partition import Partition

__all__ = ["FaultInjector", "FaultUnavailable", "Rule", "RuleBook", "api_key_of",
           "delete_records_of"]

T = TypeVar("T")



class FaultUnavailable(RuntimeError):
    """The fault cannot be applied (no such service, topic or broker)."""


class FaultInjector(RuleBook):
    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster

    def _changed(self) -> None:
        if self.cluster.use_processes:
            self.cluster.push_rules()

    def inject_error(self, api: int | str | None, error: int | str, count: int | None = 1, *,
                     topic: str | None = None, partition: int | None = None,
                     group: str | None = None, client_id: str | None = None,
                     broker: int | None = None, level: str | None = None,
                     include_replicas: bool = False) -> Rule:
        """Answer the next ``count`` matching requests of ``api`` with ``error``."""
        return self.add(Rule("error", api_key_of(api), error_code=errors.code_named(error),
                             remaining=count, topic=topic, partition=partition, group=group,
                             client_id=client_id, broker=broker, level=level,
                             include_replicas=include_replicas))

    def delay(self, api: int | str | None, ms: int, count: int | None = None, *,
              topic: str | None = None, partition: int | None = None,
              group: str | None = None, client_id: str | None = None,
              broker: int | None = None) -> Rule:
        """Hold the responses of ``api`` for ``ms`` milliseconds."""
        return self.add(Rule("delay", api_key_of(api), delay_ms=ms, remaining=count,
                             topic=topic, partition=partition, group=group,
                             client_id=client_id, broker=broker))

    def drop_requests(self, api: int | str | None, count: int | None = 1, *,
                      topic: str | None = None, group: str | None = None,
                      client_id: str | None = None, broker: int | None = None) -> Rule:
        """Close the connection instead of answering the next ``count`` requests of ``api``."""
        return self.add(Rule("drop", api_key_of(api), remaining=count, topic=topic,
                             group=group, client_id=client_id, broker=broker))

    def throttle(self, ms: int, api: int | str | None = None, count: int | None = None, *,
                 client_id: str | None = None, broker: int | None = None) -> Rule:
        """Throttle like a quota: ``throttle_time_ms`` in the response, then the
        connection is muted for that long (KIP-219); older request versions get the
        response itself delayed, as Kafka did before KIP-219."""
        return self.add(Rule("throttle", api_key_of(api), delay_ms=ms, remaining=count,
                             client_id=client_id, broker=broker))

    def deny_topic(self, topic: str, client_id: str | None = None) -> Rule:
        """An ACL denial on ``topic``: TOPIC_AUTHORIZATION_FAILED until removed."""
        return self.add(Rule("error", None, error_code=errors.TopicAuthorizationFailedError.code,
                             remaining=None, topic=topic, client_id=client_id))

    # -- brokers -------------------------------------------------------------------------
    def _sync(self, coro: Any) -> None:
        if not self.cluster.can_block():
            coro.close()
            raise RuntimeError("on the cluster's loop, await the *_async variant instead")
        self.cluster.call(coro)

    async def stop_broker_async(self, node_id: int) -> None:
        self._broker(node_id)
        await self.cluster.stop_broker(node_id)

    async def kill_broker_async(self, node_id: int) -> None:
        self._broker(node_id)
        await self.cluster.kill_broker(node_id)

    async def restart_broker_async(self, node_id: int) -> None:
        self._broker(node_id)
        await self.cluster.restart_broker(node_id)

    def stop_broker(self, node_id: int) -> None:
        self._sync(self.stop_broker_async(node_id))

    def kill_broker(self, node_id: int) -> None:
        self._sync(self.kill_broker_async(node_id))

    def restart_broker(self, node_id: int) -> None:
        self._sync(self.restart_broker_async(node_id))

    def _broker(self, node_id: int) -> None:
        if node_id not in (self.cluster.processes if self.cluster.use_processes
                           else self.cluster.brokers):
            raise FaultUnavailable(f"no broker {node_id}")

    async def _remote(self, node_id: int, method: str, args: Json) -> Any:
        """Call a broker process's service (a multi-process cluster), on the loop."""
        server = self.cluster.controller_server
        if server is None or node_id not in server.channels:
            raise FaultUnavailable(f"broker {node_id} is not running")
        try:
            return await server.call_broker(node_id, method, args)
        except RuntimeError as exc:
            raise FaultUnavailable(str(exc)) from None

    def _running_processes(self) -> list[int]:
        server = self.cluster.controller_server
        return sorted(server.channels) if server is not None else []

    def isolate_replication(self, node_id: int, isolated: bool = True) -> None:
        """Cut ``node_id`` off replication (it neither fetches nor is fetched from)."""
        if self.cluster.use_processes:
            self._sync(self.isolate_replication_async(node_id, isolated))
            return

        def run() -> None:
            self._fence_replication(node_id, isolated)
            if isolated:
                # Drop the replication connections now, both ways, as a network
                # partition would; fetchers reconnecting are refused until healed.
                for broker in self.cluster.brokers.values():
                    for conn in list(broker.connections.values()):
                        rid = conn.info.replica_of
                        if rid is not None and (broker.node_id == node_id or rid == node_id):
                            conn.abort()

        self.cluster._on_loop(run)

    def _fence_replication(self, node_id: int, isolated: bool) -> None:
        info = self.cluster.controller.brokers.get(node_id)
        if info is None:
            raise FaultUnavailable(f"no broker {node_id}")
        info.fenced_replication = isolated
        if self.cluster.controller_server is not None:
            self.cluster.controller_server.flush()     # the brokers learn it first

    async def isolate_replication_async(self, node_id: int, isolated: bool = True) -> None:
        if not self.cluster.use_processes:
            self.isolate_replication(node_id, isolated)
            return
        self._fence_replication(node_id, isolated)
        if isolated:
            for node in self._running_processes():
                await self._remote(node, "drop", {"replicas_of": node_id})

    def drop_connections(self, broker: int | None = None, client_id: str | None = None,
                         include_replicas: bool = False) -> int:
        """Close matching client connections now; returns how many were closed."""
        if self.cluster.use_processes:
            return self._sync_result(self.drop_connections_async(broker, client_id,
                                                                 include_replicas))

        def run() -> int:
            n = 0
            for b in self.cluster.brokers.values():
                if broker is not None and b.node_id != broker:
                    continue
                for conn in list(b.connections.values()):
                    if conn.info.replica and not include_replicas:
                        continue
                    if client_id is not None and conn.info.client_id != client_id:
                        continue
                    conn.abort()
                    n += 1
            return n

        return self.cluster._on_loop(run)

    async def drop_connections_async(self, broker: int | None = None,
                                     client_id: str | None = None,
                                     include_replicas: bool = False) -> int:
        if not self.cluster.use_processes:
            return self.drop_connections(broker, client_id, include_replicas)
        n = 0
        for node in self._running_processes():
            if broker is None or node == broker:
                n += int(await self._remote(node, "drop", {
                    "client_id": client_id, "include_replicas": include_replicas}))
        return n

    # -- leadership and coordinators -------------------------------------------------------
    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        """Move a partition's leadership to ``to`` (an ISR member) or any other ISR member."""
        if topic not in self.cluster.controller.topics:
            raise FaultUnavailable(f"no topic {topic!r}")
        return self.cluster.move_leader(topic, partition, to)

    def coordinator_of(self, key: str, key_type: str = "group") -> tuple[str, int, int]:
        """(internal topic, partition, leader) of the coordinator for ``key``."""
        internal = OFFSETS if key_type == "group" else TRANSACTIONS
        state = self.cluster.controller.topics.get(internal.name)
        if state is None:
            raise FaultUnavailable(
                f"{internal.name} does not exist yet (no coordinator has been used)")
        index = internal.partition_for(key, self.cluster.config.props, self.cluster.controller)
        return internal.name, index, state.partitions[index].leader

    def move_coordinator(self, key: str, to: int | None = None, key_type: str = "group") -> int:
        """Move the coordinator of a group (or transactional id): returns the new one."""
        topic, index, _ = self.coordinator_of(key, key_type)
        return self.cluster.move_leader(topic, index, to)

    def forget_member(self, group_id: str, member_id: str) -> bool:
        """Make the group's coordinator forget ``member_id``; False without a coordinator."""
        if self.cluster.use_processes:
            return self._sync_result(self.forget_member_async(group_id, member_id))

        def run() -> bool:
            try:
                _, _, leader = self.coordinator_of(group_id)
            except FaultUnavailable:
                return False
            broker = self.cluster.brokers.get(leader)
            groups = broker.groups if broker is not None else None
            return groups is not None and groups.forget_member(group_id, member_id)

        return self.cluster._on_loop(run)

    async def forget_member_async(self, group_id: str, member_id: str) -> bool:
        if not self.cluster.use_processes:
            return self.forget_member(group_id, member_id)
        try:
            _, _, leader = self.coordinator_of(group_id)
        except FaultUnavailable:
            return False
        if leader < 0 or leader not in self._running_processes():
            return False
        return bool(await self._remote(leader, "forget_member",
                                       {"group": group_id, "member": member_id}))

    def _consumer_fault(self, group_id: str, act: str, member_id: str = "") -> int:
        def run() -> int:
            _, _, leader = self.coordinator_of(group_id)
            broker = self.cluster.brokers.get(leader)
            groups = broker.groups if broker is not None else None
            if groups is None:
                raise FaultUnavailable(f"no coordinator for group {group_id}")
            if act == "bump":
                return groups.bump_group_epoch(group_id)
            return int(groups.fence_member_epoch(group_id, member_id))

        result: int = self.cluster._on_loop(run)
        return result

    def bump_group_epoch(self, group_id: str) -> int:
        """Bump a consumer group's epoch the way a rebalance does, and move its members to
        the new epoch on the coordinator only (their answers "lost"): their next OffsetCommit
        or OffsetFetch with the old epoch gets STALE_MEMBER_EPOCH, and their next heartbeat
        learns the new one. Returns the number of members moved."""
        return self._consumer_fault(group_id, "bump")

    def fence_member_epoch(self, group_id: str, member_id: str) -> bool:
        """Put a consumer-group member's epoch two steps ahead on the coordinator: its next
        heartbeat gets FENCED_MEMBER_EPOCH, as Kafka answers a member that missed two epochs.
        False if there is no such member."""
        return bool(self._consumer_fault(group_id, "fence", member_id))

    # -- share groups (KIP-932) ---------------------------------------------------------------
    def expire_share_locks(self, group_id: str, topic: str, partition: int,
                           member_id: str | None = None) -> int:
        """Every acquisition lock of a share group on a partition (of one member) expires
        now, on the partition leader: the records are delivered again (or archived, past the
        delivery count limit). Returns how many records were released."""
        args: Json = {"group": group_id, "topic": topic, "partition": partition,
                      "member": member_id}
        leader = self._leader_of(topic, partition)
        if self.cluster.use_processes:
            return int(self._sync_result(self._remote(leader, "expire_share_locks", args)))

        broker = self.cluster.brokers.get(leader)
        manager = None if broker is None else broker.share
        if manager is None:
            raise FaultUnavailable(f"{topic}-{partition} has no leader")
        if not self.cluster.can_block():   # on the loop: the write follows in the background
            return manager.expire_locks(group_id, topic, partition, member_id)[0]
        return self.cluster.call(manager.expire_locks_written(group_id, topic, partition,
                                                              member_id))

    def bump_share_state_epoch(self, group_id: str, topic: str, partition: int) -> bool:
        """FENCED_STATE_EPOCH as Kafka produces it: the share coordinator moves the state
        epoch of a share-partition on (its state kept); the partition leader's next write is
        fenced, and it reads the state again. False if the share-partition has no state."""
        key = state_key(group_id, self._topic_id(topic), partition)
        node = find_coordinator(self.cluster.controller, self.cluster.config.props, key,
                                SHARE_KEY).node_id
        args: Json = {"group": group_id, "topic": topic, "partition": partition}
        if self.cluster.use_processes:
            return bool(self._sync_result(self._remote(node, "bump_share_state_epoch", args)))

        def run() -> bool:
            broker = self.cluster.brokers.get(node)
            if broker is None or broker.share_coordinator is None:
                raise FaultUnavailable(f"no share coordinator for {key}")
            return broker.share_coordinator.bump_state_epoch(group_id, self._topic_id(topic),
                                                             partition)

        result: bool = self.cluster._on_loop(run)
        return result

    def _topic_id(self, topic: str) -> uuid.UUID:
        state = self.cluster.controller.topics.get(topic)
        if state is None:
            raise FaultUnavailable(f"no topic {topic!r}")
        return state.topic_id

    # -- data -----------------------------------------------------------------------------
    def delete_records(self, topic: str, partition: int, before_offset: int = -1) -> int:
        """Move the log start of ``topic``-``partition`` to ``before_offset`` (-1: the high
        watermark), as DeleteRecords or retention would; returns the new log start."""
        if self.cluster.use_processes:
            return self._sync_result(self.delete_records_async(topic, partition, before_offset))

        def run() -> int:
            broker = self.cluster.brokers.get(self._leader_of(topic, partition))
            p = broker.partitions.get((topic, partition)) if broker is not None else None
            if p is None:
                raise FaultUnavailable(f"{topic}-{partition} has no leader")
            return delete_records_of(p, before_offset)

        return self.cluster._on_loop(run)

    async def delete_records_async(self, topic: str, partition: int,
                                   before_offset: int = -1) -> int:
        if not self.cluster.use_processes:
            return self.delete_records(topic, partition, before_offset)
        leader = self._leader_of(topic, partition)
        return int(await self._remote(leader, "delete_records", {
            "topic": topic, "partition": partition, "before": before_offset}))

    def _leader_of(self, topic: str, partition: int) -> int:
        state = self.cluster.controller.topics.get(topic)
        if state is None or not 0 <= partition < len(state.partitions):
            raise FaultUnavailable(f"no partition {topic}-{partition}")
        return state.partitions[partition].leader

    def _sync_result(self, coro: Coroutine[Any, Any, T]) -> T:
        if not self.cluster.can_block():
            coro.close()
            raise RuntimeError("on the cluster's loop, await the *_async variant instead")
        return self.cluster.call(coro)


def delete_records_of(p: Partition, before_offset: int) -> int:
    """Move a led partition's log start to ``before_offset`` (-1: its high watermark)."""
    if not p.is_leader:
        raise FaultUnavailable(f"{p.topic}-{p.index} has no leader")
    offset = p.high_watermark if before_offset < 0 else before_offset
    if offset > p.high_watermark:
        raise ValueError(f"offset {offset} is beyond the high watermark {p.high_watermark}")
    if offset > p.log_start_offset:
        p.log.delete_records_before(offset)
    return p.log_start_offset
