"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

Each topic's partitions count against its client's ``controller_mutation_rate``
(KIP-599, ``kaflite.cluster.quotas.enforce.MutationQuota``): strictly from
CreateTopics v6, DeleteTopics v5 and CreatePartitions v3 (a topic over the
quota gets THROTTLING_QUOTA_EXCEEDED), permissively before (it goes ahead);
the response's ``throttle_time_ms`` says how long to wait. A ``validate_only``
request mutates nothing and is not counted.

One request creates at most ``MAX_PARTITIONS_PER_REQUEST`` partitions: a request
that asks for more gets POLICY_VIOLATION for every topic and creates nothing,
rather than a broker busy for minutes placing a fuzzer's two billion partitions.
For CreateTopics that is Kafka's controller's check (``MAX_PARTITIONS_PER_BATCH``,
before the names are checked). For CreatePartitions Kafka's controller bounds the
records of one operation at the same 10,000 (``MAX_RECORDS_PER_USER_OP``), where
the topic that overflows fails; kaflite refuses the whole request up front.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflite.cluster.configs import SOURCE_CODES, effective_topic_configs, validate_topic_configs
from kaflite.cluster.controller import (
    MAX_PARTITIONS_PER_REQUEST,
    TOO_MANY_PARTITIONS,
    Controller,
)
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers.metadata import validate_topic_name
from kaflite.cluster.quotas.enforce import MutationQuota
from kaflite.config import ConfigError
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kaflite.protocol.messages import create_partitions_response as cpr
from kaflite.protocol.messages import create_topics_request as ctq
from kaflite.protocol.messages import create_topics_response as ctr
from kaflite.protocol.messages import delete_topics_response as dtr
from kaflite.protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

log = logging.getLogger("kaflite.cluster.admin")

# The first version of each API that answers THROTTLING_QUOTA_EXCEEDED (strict quota).
STRICT_SINCE = {CreateTopicsRequest.API_KEY: 6, DeleteTopicsRequest.API_KEY: 5,
                CreatePartitionsRequest.API_KEY: 3}


def _mutation_quota(broker: Broker, conn: ServerConnection, header: RequestHeader) -> MutationQuota:
    strict = header.request_api_version >= STRICT_SINCE[header.request_api_key]
    return MutationQuota(broker.quotas, conn.info.principal, header.client_id, strict)


def _throttle(conn: ServerConnection, quota: MutationQuota) -> int:
    conn.quota_throttle_ms = max(conn.quota_throttle_ms, quota.throttle_time_ms)
    return quota.throttle_time_ms


def _plan(broker: Broker, t: ctq.CreatableTopic) -> list[list[int]]:
    controller = broker.controller
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise errors.InvalidRequestError(
                "Both numPartitions or replicationFactor and replicasAssignments were set")
        out = []
        for i, a in enumerate(sorted(t.assignments, key=lambda a: a.partition_index)):
            if a.partition_index != i:
                raise errors.InvalidReplicaAssignmentError("partitions must be 0..n-1")
            if not a.broker_ids or len(set(a.broker_ids)) != len(a.broker_ids):
                raise errors.InvalidReplicaAssignmentError(f"bad replicas for partition {i}")
            for b in a.broker_ids:
                if b not in controller.brokers:
                    raise errors.InvalidReplicaAssignmentError(f"unknown broker {b}")
            out.append(list(a.broker_ids))
        return out
    partitions = broker.config.int("num.partitions") if t.num_partitions == -1 else t.num_partitions
    rf = broker.config.int("default.replication.factor") if t.replication_factor == -1 \
        else t.replication_factor
    if partitions <= 0:
        raise errors.InvalidPartitionsError("Number of partitions must be larger than 0.")
    if rf <= 0:
        raise errors.InvalidReplicationFactorError("Replication factor must be larger than 0.")
    return controller.assign_replicas(partitions, rf)


async def handle_create_topics(broker: Broker, conn: ServerConnection, header: RequestHeader,
                               req: CreateTopicsRequest) -> CreateTopicsResponse:
    """Validate every topic, open the new logs on a worker thread (``_prepare_logs``),
    then create the topics in one metadata batch. The names are reserved between the
    two (``controller.creating``): a second CreateTopics of one of them meanwhile is
    TOPIC_ALREADY_EXISTS, as Kafka's single controller thread would answer it."""
    controller = broker.controller
    quota = _mutation_quota(broker, conn, header)
    seen: dict[str, int] = {}
    for t in req.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    asked = sum(len(t.assignments) if t.assignments else
                broker.config.int("num.partitions") if t.num_partitions == -1
                else max(t.num_partitions, 0) for t in req.topics)
    results: list[ctr.CreatableTopicResult] = []
    todo: list[_NewTopic] = []
    for t in req.topics:
        res = ctr.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=0)
        results.append(res)
        try:
            if asked > MAX_PARTITIONS_PER_REQUEST:   # (Kafka checks it before the names)
                raise errors.PolicyViolationError(TOO_MANY_PARTITIONS)
            if seen[t.name] > 1:
                raise errors.InvalidRequestError(f"Duplicate topic name {t.name}")
            validate_topic_name(t.name)
            if t.name in controller.topics or t.name in controller.creating:
                raise errors.TopicAlreadyExistsError(f"Topic '{t.name}' already exists.")
            try:
                configs = validate_topic_configs({c.name: c.value for c in t.configs})
            except ConfigError as exc:
                raise errors.InvalidConfigError(exc.message) from None
            plan = _plan(broker, t)
            res.num_partitions = len(plan)
            res.replication_factor = len(plan[0])
            effective = effective_topic_configs(configs, broker.config, broker.dynamic_config)
            res.configs = [
                ctr.CreatableTopicConfigs(name, value, False, SOURCE_CODES[source], False)
                for name, (value, source) in effective.items()
            ]
            if not req.validate_only:
                quota.record(len(plan))
                controller.creating.add(t.name)
                todo.append(_NewTopic(res, plan, configs, uuid.uuid4()))
        except errors.KafkaError as exc:
            _failed(res, exc)
    try:
        await _prepare_logs(controller, todo)
        with controller.batched():   # (one write of the metadata)
            for new in todo:
                try:
                    topic = controller.create_topic(new.result.name, new.plan, new.configs,
                                                    topic_id=new.topic_id)
                    new.result.topic_id = topic.topic_id
                except errors.KafkaError as exc:
                    _failed(new.result, exc)
    finally:
        for new in todo:
            controller.creating.discard(new.result.name)
            if new.result.error_code:
                for listener in controller.listeners.values():
                    listener.drop_prepared(new.result.name, new.topic_id)
    return CreateTopicsResponse(throttle_time_ms=_throttle(conn, quota), topics=results)


@dataclass
class _NewTopic:
    result: ctr.CreatableTopicResult
    plan: list[list[int]]
    configs: dict[str, str]
    topic_id: uuid.UUID


def _failed(res: ctr.CreatableTopicResult, exc: errors.KafkaError) -> None:
    res.error_code, res.error_message = exc.code, exc.message
    res.num_partitions = res.replication_factor = -1
    res.configs = []


async def _prepare_logs(controller: Controller, todo: list[_NewTopic]) -> None:
    """Open the new topics' logs on a worker thread, for the brokers of this process:
    at 1,000 partitions a request, opening them in the controller's callbacks held the
    event loop of every broker for seconds (issue 36)."""
    jobs = []
    for new in todo:
        hosted: dict[int, list[int]] = {}
        for index, replicas in enumerate(new.plan):
            for node in replicas:
                hosted.setdefault(node, []).append(index)
        for node, partitions in hosted.items():
            listener = controller.listeners.get(node)
            job = None if listener is None else listener.log_preparer(
                new.result.name, new.topic_id, new.configs, partitions)
            if job is not None:
                jobs.append(job)
    if jobs:
        await asyncio.to_thread(_run_jobs, jobs)


def _run_jobs(jobs: list[Callable[[], int]]) -> None:
    for job in jobs:
        try:
            job()
        except OSError:   # left to the controller's callback, which opens it itself
            log.exception("cannot prepare the logs of a new topic")


async def handle_delete_topics(broker: Broker, conn: ServerConnection, header: RequestHeader,
                               req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    controller = broker.controller
    quota = _mutation_quota(broker, conn, header)
    wanted: list[tuple[str | None, uuid.UUID]] = [(n, ZERO_UUID) for n in req.topic_names]
    wanted += [(t.name, t.topic_id) for t in req.topics]
    responses = []
    with controller.batched():   # (one write of the metadata)
        for name, topic_id in wanted:
            res = dtr.DeletableTopicResult(name=name, topic_id=topic_id, error_code=0)
            try:
                if name is None:
                    topic = controller.topics_by_id.get(topic_id)
                    if topic is None:
                        raise errors.UnknownTopicIdError(str(topic_id))
                    name = res.name = topic.name
                topic = controller.topics.get(name)
                if topic is None:
                    raise errors.UnknownTopicOrPartitionError(name)
                if topic.internal:
                    raise errors.TopicDeletionDisabledError(f"{name} is internal")
                res.topic_id = topic.topic_id
                quota.record(len(topic.partitions))
                controller.delete_topic(name)
            except errors.KafkaError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            responses.append(res)
    return DeleteTopicsResponse(throttle_time_ms=_throttle(conn, quota), responses=responses)


async def handle_create_partitions(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                   req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    controller = broker.controller
    quota = _mutation_quota(broker, conn, header)
    results = []
    asked = 0
    for t in req.topics:
        topic = controller.topics.get(t.name)
        if topic is not None:
            asked += max(t.count - len(topic.partitions), 0)
    with controller.batched():   # (one write of the metadata)
        for t in req.topics:
            res = cpr.CreatePartitionsTopicResult(name=t.name, error_code=0)
            try:
                if asked > MAX_PARTITIONS_PER_REQUEST:
                    raise errors.PolicyViolationError(TOO_MANY_PARTITIONS)
                topic = controller.topics.get(t.name)
                if topic is None:
                    raise errors.UnknownTopicOrPartitionError(t.name)
                current = len(topic.partitions)
                if t.count < current:
                    raise errors.InvalidPartitionsError(
                        f"Topic currently has {current} partitions, which is higher than the "
                        f"requested {t.count}.")
                if t.count == current:
                    raise errors.InvalidPartitionsError(f"Topic already has {current} partitions.")
                rf = len(topic.partitions[0].replicas)
                if t.assignments is not None:
                    if len(t.assignments) != t.count - current:
                        raise errors.InvalidReplicaAssignmentError(
                            f"Increasing the number of partitions by {t.count - current} but "
                            f"{len(t.assignments)} assignments provided.")
                    plan = [list(a.broker_ids) for a in t.assignments]
                    for replicas in plan:
                        if any(b not in controller.brokers for b in replicas):
                            raise errors.InvalidReplicaAssignmentError(
                                f"unknown broker in {replicas}")
                        if len(replicas) != rf or len(set(replicas)) != rf:
                            raise errors.InvalidReplicaAssignmentError(
                                f"the assignment {replicas} is not {rf} distinct brokers, as the "
                                f"topic's other partitions have")
                else:
                    plan = controller.assign_replicas(t.count - current, rf, start=current)
                if not req.validate_only:
                    quota.record(t.count - current)
                    controller.create_partitions(t.name, plan)
            except errors.KafkaError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            results.append(res)
    return CreatePartitionsResponse(throttle_time_ms=_throttle(conn, quota), results=results)


HANDLERS = [
    Handler(CreateTopicsRequest, 2, 7, handle_create_topics),
    Handler(DeleteTopicsRequest, 1, 6, handle_delete_topics),
    Handler(CreatePartitionsRequest, 0, 3, handle_create_partitions),
]
