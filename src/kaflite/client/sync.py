"""Blocking façades over the async clients, for scripts and the Spark data source.

    from kaflite.client.sync import Producer, Consumer, Admin

    with Producer({"bootstrap.servers": servers}) as p:
        p.send("t", b"v")            # blocks for the acknowledgement
        p.produce("t", b"w")         # queues; flush() waits
        p.flush()

Every sync client runs its async client on one private event loop thread,
shared by all sync clients of the process. Blocking calls submit a coroutine
to that loop and wait for it. ``Producer.produce`` does not wait: records are
batched in the caller's thread and handed to the loop a whole batch at a time
(``_sync_batches``), so the two threads do not take the GIL from each other
for every record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from kaflite._loop import SharedLoop
from kaflite.client import admin as _admin
from kaflite.client import consumer as _consumer
from kaflite.client import producer as _producer
from kaflite.client import share as _share
from kaflite.client._base import BaseClient
from kaflite.client._quotas import ClientQuotaAlteration, QuotaEntity, QuotaFilterComponent
from kaflite.client._sync_batches import CallerBatches
from kaflite.client._token_admin import DelegationToken
from kaflite.client.admin import (
    ConfigEntry,
    ConfigResource,
    ConsumerGroupDescription,
    GroupDescription,
    GroupListing,
    NewTopic,
    TransactionDescription,
    TransactionListing,
)
from kaflite.client.consumer import (
    CommitCallback,
    ConsumerRecord,
    GroupMembershipOperation,
    RecordList,
    TopicPartition,
)
from kaflite.client.consumer._types import K as CK
from kaflite.client.consumer._types import OffsetAndMetadata, OffsetAndTimestamp
from kaflite.client.consumer._types import V as CV
from kaflite.client.events import Event
from kaflite.client.metadata import TopicMetadata
from kaflite.client.pool import ConnectionInfo
from kaflite.client.producer import ConsumerGroupMetadata
from kaflite.client.producer._values import HeadersArg, K, V
from kaflite.security.acl import AclBinding, AclBindingFilter

__all__ = ["Admin", "Consumer", "Producer", "ShareConsumer"]

T = TypeVar("T")
C = TypeVar("C", bound=BaseClient)
_LOOP = SharedLoop("kaflite-client")   # every sync client of the process runs on it


class _SyncClient:
    _async: BaseClient

    def __init__(self) -> None:
        self._loop_thread = _LOOP.get()
        self._loop = self._loop_thread.loop

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self._loop_thread.run(coro, timeout)

    def _make(self, make: Callable[[], C]) -> C:
        """The async client ``make`` returns, made on the loop (its tasks and locks are
        the loop's)."""
        async def build() -> C:
            return make()
        return self._run(build())

    def start(self) -> Self:
        self._run(self._async.start())
        return self

    def close(self) -> None:
        self._run(self._async.close())

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def connections(self) -> list[ConnectionInfo]:
        async def get() -> list[ConnectionInfo]:
            return list(self._async.connections())
        return self._run(get())

    def client_instance_id(self, timeout: float = 0.0) -> uuid.UUID | None:
        """The client's telemetry instance id (KIP-714; see ``BaseClient``)."""
        return self._run(self._async.client_instance_id(timeout))

    def events(self, kind: str | None = None) -> list[Event]:
        async def get() -> list[Event]:
            return list(self._async.events(kind))
        return self._run(get())

    def on_event(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback`` with each new event, on the client's loop thread; returns an
        unsubscribe function."""
        async def subscribe() -> Callable[[], None]:
            return self._async.on_event(callback)
        return self._run(subscribe())


class Producer(_SyncClient, CallerBatches[K, V], Generic[K, V]):
    """Generic in its keys' and values' types as the async ``Producer``.

    ``produce`` (see ``CallerBatches``) builds batches in the caller's thread and
    hands the loop thread whole batches, one wake-up per batch; records it cannot
    place there (headers, a partition, a timestamp, serializers, transactions) are
    queued in order and handed over in bursts.

    ``buffer.memory`` bounds what is held here too, as Java's ``send`` does:
    when the accumulator and the caller-side batches hold that much, ``produce``
    blocks for up to ``max.block.ms`` for room, then raises ``BufferFull`` (a
    ``BufferError``, as confluent-kafka raises). ``max.block.ms=0`` raises at once.
    """

    def __init__(self, config: Mapping[str, object] | None = None, *,
                 key_serializer: Callable[[K], bytes | None] | None = None,
                 value_serializer: Callable[[V], bytes | None] | None = None,
                 **kwargs: object) -> None:
        super().__init__()
        self._async: _producer.Producer[K, V] = self._make(lambda: _producer.Producer(
            config, key_serializer=key_serializer, value_serializer=value_serializer, **kwargs))
        self._target = self._async
        self._max_block = self._async.config.int("max.block.ms") / 1000
        self._init_batches()

    def send(self, topic: str, value: V, key: K | None = None, partition: int | None = None,
             headers: HeadersArg = None, timestamp: int | None = None,
             timeout: float | None = None) -> _producer.RecordMetadata:
        async def send() -> _producer.RecordMetadata:
            await self._queued_then(_nothing)   # records produced before go first
            return await self._async.send(topic, value, key, partition, headers, timestamp)
        return self._run(send(), timeout)

    def send_batch(self, topic: str, values: Sequence[V], keys: Sequence[K | None] | None = None,
                   partition: int | None = None,
                   timeout: float | None = None) -> _producer.BatchMetadata:
        async def send() -> _producer.BatchMetadata:
            await self._queued_then(_nothing)
            return await self._async.send_batch(topic, values, keys, partition)
        return self._run(send(), timeout)

    produce_many = send_batch

    def flush(self, timeout: float | None = None) -> None:
        async def flush() -> None:
            await self._queued_then(lambda: self._async.flush(timeout))
        self._run(flush())

    def init_transactions(self, timeout: float | None = None) -> None:
        self._run(self._async.init_transactions(), timeout)

    def begin_transaction(self) -> None:
        async def begin() -> None:
            self._async.begin_transaction()
        self._run(begin())

    def send_offsets_to_transaction(self, offsets: Mapping[tuple[str, int], int],
                                    group: ConsumerGroupMetadata | str,
                                    timeout: float | None = None) -> None:
        self._run(self._async.send_offsets_to_transaction(offsets, group), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._run(self._queued_then(self._async.commit_transaction), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._run(self._queued_then(self._async.abort_transaction), timeout)

    def partitions_for(self, topic: str) -> list[int] | None:
        async def get() -> list[int] | None:
            await self._async.metadata.ensure_topic(topic, 30)
            return self._async.partitions_for(topic)
        return self._run(get())

    def close(self) -> None:
        self.flush()
        super().close()


async def _nothing() -> None:
    return None


class Consumer(_SyncClient, Generic[CK, CV]):
    """Generic in its keys' and values' types as the async ``Consumer``."""

    def __init__(self, config: Mapping[str, object] | None = None, *,
                 key_deserializer: Callable[[bytes], CK] | None = None,
                 value_deserializer: Callable[[bytes], CV] | None = None,
                 **kwargs: object) -> None:
        super().__init__()
        self._async: _consumer.Consumer[CK, CV] = self._make(lambda: _consumer.Consumer(
            config, key_deserializer=key_deserializer, value_deserializer=value_deserializer,
            **kwargs))

    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None,
                  listener: _consumer.RebalanceListener | None = None) -> None:
        async def sub() -> None:
            self._async.subscribe(topics, pattern, listener)
        self._run(sub())

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        async def assign() -> None:
            self._async.assign(partitions)
        self._run(assign())

    def close(self, membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT
              ) -> None:
        """As the async ``close``: ``membership`` says whether the member leaves (KIP-1092)."""
        self._run(self._async.close(membership))

    def assignment(self) -> set[TopicPartition]:
        return self._async.assignment()

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._async.group_metadata()

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None
             ) -> RecordList[CK, CV]:
        return self._run(self._async.poll(timeout_ms, max_records))

    def getmany(self, timeout_ms: int = 0, max_records: int | None = None
                ) -> dict[TopicPartition, RecordList[CK, CV]]:
        return self._run(self._async.getmany(timeout_ms=timeout_ms, max_records=max_records))

    def __iter__(self) -> Iterator[ConsumerRecord[CK, CV]]:
        while not self._async._closed:
            yield from self.poll(1000)

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        async def seek() -> None:
            self._async.seek(tp, offset)
        self._run(seek())

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        async def seek() -> None:
            self._async.seek_to_beginning(*tps)
        self._run(seek())

    def seek_to_end(self, *tps: TopicPartition) -> None:
        async def seek() -> None:
            self._async.seek_to_end(*tps)
        self._run(seek())

    def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        return self._run(self._async.position(tp))

    def committed(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        return self._run(self._async.committed(tp))

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None
               ) -> None:
        self._run(self._async.commit(offsets))

    def commit_async(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None
                     = None, callback: CommitCallback | None = None) -> None:
        """As the async ``commit_async``; ``callback(offsets, error)`` runs on the client's
        event-loop thread."""
        async def commit() -> None:
            self._async.commit_async(offsets, callback)
        self._run(commit())

    def pause(self, *tps: TopicPartition) -> None:
        async def pause() -> None:
            self._async.pause(*tps)
        self._run(pause())

    def resume(self, *tps: TopicPartition) -> None:
        async def resume() -> None:
            self._async.resume(*tps)
        self._run(resume())

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._async.end_offsets(list(tps)))

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._async.beginning_offsets(list(tps)))

    def offsets_for_times(self, query: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._async.offsets_for_times(query))

    def lag(self, tp: TopicPartition) -> int | None:
        return self._async.lag(tp)


class ShareConsumer(_SyncClient, Generic[CK, CV]):
    """The blocking ``kaflite.client.share.ShareConsumer``."""

    def __init__(self, config: Mapping[str, object] | None = None, *,
                 key_deserializer: Callable[[bytes], CK] | None = None,
                 value_deserializer: Callable[[bytes], CV] | None = None,
                 **kwargs: object) -> None:
        super().__init__()
        self._async: _share.ShareConsumer[CK, CV] = self._make(lambda: _share.ShareConsumer(
            config, key_deserializer=key_deserializer, value_deserializer=value_deserializer,
            **kwargs))

    def subscribe(self, topics: Iterable[str]) -> None:
        async def sub() -> None:
            self._async.subscribe(topics)
        self._run(sub())

    def unsubscribe(self) -> None:
        async def unsub() -> None:
            self._async.unsubscribe()
        self._run(unsub())

    def assignment(self) -> set[TopicPartition]:
        return self._async.assignment()

    def poll(self, timeout_ms: int = 1000) -> list[_share.ShareRecord[CK, CV]]:
        return self._run(self._async.poll(timeout_ms))

    def acknowledge(self, record: _share.ShareRecord[CK, CV],
                    type: _share.AcknowledgeType = _share.AcknowledgeType.ACCEPT) -> None:
        async def ack() -> None:
            self._async.acknowledge(record, type)
        self._run(ack())

    def commit_sync(self, timeout_ms: int | None = None
                    ) -> dict[TopicPartition, BaseException | None]:
        return dict(self._run(self._async.commit_sync(timeout_ms)))

    def commit_async(self) -> None:
        async def commit() -> None:
            self._async.commit_async()
        self._run(commit())

    def acquisition_lock_timeout_ms(self) -> int | None:
        return self._async.acquisition_lock_timeout_ms()

    def acquisition_lock_deadline(self, record: _share.ShareRecord[CK, CV]) -> float | None:
        return self._async.acquisition_lock_deadline(record)

    def set_acknowledgement_commit_callback(
            self, callback: _share.AcknowledgementCommitCallback | None) -> None:
        """The callback runs on the client's event loop thread."""
        self._async.set_acknowledgement_commit_callback(callback)


class Admin(_SyncClient):
    """The async ``Admin``'s operations, each blocking until its answer."""

    def __init__(self, config: Mapping[str, object] | None = None, **kwargs: object) -> None:
        super().__init__()
        self._async: _admin.Admin = self._make(lambda: _admin.Admin(config, **kwargs))

    def describe_client_quotas(self, components: Iterable[QuotaFilterComponent] = (),
                               strict: bool = False) -> dict[QuotaEntity, dict[str, float]]:
        return self._run(self._async.describe_client_quotas(list(components), strict))

    def alter_client_quotas(self, alterations: Iterable[ClientQuotaAlteration],
                            validate_only: bool = False) -> None:
        self._run(self._async.alter_client_quotas(list(alterations), validate_only))

    def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False) -> None:
        self._run(self._async.create_topics(topics, validate_only))

    def delete_topics(self, names: Iterable[str]) -> None:
        self._run(self._async.delete_topics(names))

    def list_topics(self, internal: bool = False) -> list[str]:
        return self._run(self._async.list_topics(internal))

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicMetadata]:
        return self._run(self._async.describe_topics(names))

    def create_partitions(self, counts: Mapping[str, int]) -> None:
        self._run(self._async.create_partitions(counts))

    def describe_cluster(self) -> _admin.ClusterDescription:
        return self._run(self._async.describe_cluster())

    def unregister_broker(self, node_id: int) -> None:
        self._run(self._async.unregister_broker(node_id))

    def describe_metadata_quorum(self) -> _admin.QuorumInfo:
        return self._run(self._async.describe_metadata_quorum())

    def describe_features(self) -> _admin.FeatureMetadata:
        return self._run(self._async.describe_features())

    def update_features(self, levels: Mapping[str, int], *, downgrade: str | None = None,
                        validate_only: bool = False) -> dict[str, str | None]:
        return self._run(self._async.update_features(levels, downgrade=downgrade,
                                                     validate_only=validate_only))

    def describe_configs(self, resources: Iterable[ConfigResource]
                         ) -> dict[ConfigResource, dict[str, str | None]]:
        return self._run(self._async.describe_configs(resources))

    def describe_config_entries(self, resources: Iterable[ConfigResource],
                                include_synonyms: bool = False
                                ) -> dict[ConfigResource, list[ConfigEntry]]:
        return self._run(self._async.describe_config_entries(resources, include_synonyms))

    def alter_configs(self, changes: Mapping[ConfigResource, Mapping[str, str | None]]) -> None:
        self._run(self._async.alter_configs(changes))

    def list_groups(self) -> list[tuple[str, str, str]]:
        return self._run(self._async.list_groups())

    def list_group_listings(self, types: Iterable[str] = (), states: Iterable[str] = ()
                            ) -> list[GroupListing]:
        return self._run(self._async.list_group_listings(types, states))

    def describe_consumer_groups(self, groups: Iterable[str]
                                 ) -> dict[str, ConsumerGroupDescription]:
        return self._run(self._async.describe_consumer_groups(groups))

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
                          ) -> list[tuple[str, int, str]]:
        return self._run(self._async.list_transactions(states, producer_ids))

    def list_transaction_listings(self, states: Iterable[str] = (),
                                  producer_ids: Iterable[int] = ()) -> list[TransactionListing]:
        return self._run(self._async.list_transaction_listings(states, producer_ids))

    def describe_transactions(self, ids: Iterable[str]) -> dict[str, TransactionDescription]:
        return self._run(self._async.describe_transactions(ids))

    def describe_groups(self, groups: Iterable[str]) -> dict[str, GroupDescription]:
        return self._run(self._async.describe_groups(groups))

    def delete_groups(self, groups: Iterable[str]) -> None:
        self._run(self._async.delete_groups(groups))

    def list_group_offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._run(self._async.list_group_offsets(group))

    def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        self._run(self._async.alter_group_offsets(group, offsets))

    def list_offsets(self, query: Mapping[TopicPartition, int | str]
                     ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._run(self._async.list_offsets(query))

    def delete_records(self, before: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._run(self._async.delete_records(before))

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None
                                        ) -> dict[str, list[tuple[str, int]]]:
        return self._run(self._async.describe_user_scram_credentials(users))

    def alter_user_scram_credentials(self, upsertions: Iterable[tuple[str, str, str, int]] = (),
                                     deletions: Iterable[tuple[str, str]] = ()) -> None:
        self._run(self._async.alter_user_scram_credentials(upsertions, deletions))

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        self._run(self._async.create_acls(bindings))

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        return self._run(self._async.describe_acls(acl_filter))

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        return self._run(self._async.delete_acls(filters))

    def create_delegation_token(self, renewers: Iterable[str] = (), max_lifetime_ms: int = -1,
                                owner: str | None = None) -> DelegationToken:
        return self._run(self._async.create_delegation_token(renewers, max_lifetime_ms, owner))

    def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1) -> int:
        return self._run(self._async.renew_delegation_token(hmac, renew_period_ms))

    def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int = -1) -> int:
        return self._run(self._async.expire_delegation_token(hmac, expiry_time_period_ms))

    def describe_delegation_token(self, owners: Iterable[str] | None = None
                                  ) -> list[DelegationToken]:
        return self._run(self._async.describe_delegation_token(owners))
