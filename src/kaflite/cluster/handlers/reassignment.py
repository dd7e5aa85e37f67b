"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

ElectLeaders: PREFERRED moves leadership to the first replica when it is in the ISR;
UNCLEAN of a partition that has a leader is ELECTION_NOT_NEEDED, as Kafka's
ReplicationControlManager answers, and of a leaderless one INVALID_REQUEST (kaflite
never elects a leader from outside the ISR; Kafka would elect a live replica).

AlterPartitionReassignments v1 may forbid a change of replication factor: a target
whose size differs from the partition's (from the target of a reassignment under
way, if there is one) gets INVALID_REPLICATION_FACTOR, in Kafka 4.4's words, after
the replicas themselves are checked; the answer repeats the request's flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import code_for_exception
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kaflite.protocol.messages import alter_partition_reassignments_response as apr
from kaflite.protocol.messages import elect_leaders_response as elr
from kaflite.protocol.messages import list_partition_reassignments_response as lpr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

PREFERRED, UNCLEAN = 0, 1


def _partition_state(broker: Broker, topic: str, index: int) -> None:
    if broker.controller.partition(topic, index) is None:
        raise errors.UnknownTopicOrPartitionError(f"{topic}-{index}")


def _check_factor_unchanged(broker: Broker, topic: str, index: int, target: list[int]) -> None:
    """As Kafka's ``validatePartitionReplicationFactorUnchanged``."""
    p = broker.controller.partition(topic, index)
    if p is None:
        return
    current = len((set(p.replicas) | set(p.adding)) - set(p.removing)) \
        if p.adding or p.removing else len(p.replicas)
    if current != len(target):
        raise errors.InvalidReplicationFactorError(
            f"The replication factor is changed from {current} to {len(target)}")


async def handle_elect_leaders(broker: Broker, conn: ServerConnection, header: RequestHeader,
                               req: ElectLeadersRequest) -> ElectLeadersResponse:
    controller = broker.controller
    if req.topic_partitions is None:
        targets = [(t.name, [p.partition for p in t.partitions])
                   for t in controller.topics.values()]
    else:
        targets = [(t.topic, list(t.partitions)) for t in req.topic_partitions]
    results = []
    for topic, parts in targets:
        out = []
        for index in parts:
            res = elr.PartitionResult(partition_id=index, error_code=0)
            try:
                _partition_state(broker, topic, index)
                if req.election_type == UNCLEAN:
                    p = controller.partition(topic, index)
                    if p is not None and p.leader >= 0:
                        # as Kafka's ReplicationControlManager: a partition with a leader
                        # needs no unclean election
                        raise errors.ElectionNotNeededError(
                            "Leader election not needed for topic partition")
                    raise errors.InvalidRequestError("unclean leader election is not supported")
                if not controller.preferred_election(topic, index):
                    raise errors.ElectionNotNeededError("Leader election not needed for topic "
                                                        "partition")
            except errors.KafkaError as exc:
                res.error_code, res.error_message = code_for_exception(exc), exc.message
            out.append(res)
        results.append(elr.ReplicaElectionResult(topic=topic, partition_result=out))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)


async def handle_alter_reassignments(broker: Broker, conn: ServerConnection,
                                     header: RequestHeader,
                                     req: AlterPartitionReassignmentsRequest
                                     ) -> AlterPartitionReassignmentsResponse:
    responses = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            res = apr.ReassignablePartitionResponse(partition_index=rp.partition_index,
                                                    error_code=0)
            try:
                _partition_state(broker, t.name, rp.partition_index)
                if rp.replicas is not None and (not rp.replicas
                                                or len(set(rp.replicas)) != len(rp.replicas)):
                    raise errors.InvalidReplicaAssignmentError("replicas must be distinct")
                if rp.replicas is not None and not req.allow_replication_factor_change:
                    _check_factor_unchanged(broker, t.name, rp.partition_index, rp.replicas)
                broker.controller.reassign(t.name, rp.partition_index, rp.replicas)
            except errors.KafkaError as exc:
                res.error_code, res.error_message = code_for_exception(exc), exc.message
            parts.append(res)
        responses.append(apr.ReassignableTopicResponse(name=t.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=0, responses=responses,
        allow_replication_factor_change=req.allow_replication_factor_change)


async def handle_list_reassignments(broker: Broker, conn: ServerConnection,
                                    header: RequestHeader,
                                    req: ListPartitionReassignmentsRequest
                                    ) -> ListPartitionReassignmentsResponse:
    controller = broker.controller
    wanted = None if req.topics is None else {t.name: set(t.partition_indexes) for t in req.topics}
    topics = []
    for name, t in controller.topics.items():
        if wanted is not None and name not in wanted:
            continue
        ongoing = [
            lpr.OngoingPartitionReassignment(p.partition, list(p.replicas), list(p.adding),
                                             list(p.removing))
            for p in t.partitions
            if (p.adding or p.removing) and (wanted is None or p.partition in wanted[name])
        ]
        if ongoing:
            topics.append(lpr.OngoingTopicReassignment(name=name, partitions=ongoing))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, topics=topics)


HANDLERS = [
    Handler(ElectLeadersRequest, 0, 2, handle_elect_leaders),
    Handler(AlterPartitionReassignmentsRequest, 0, 1, handle_alter_reassignments),
    Handler(ListPartitionReassignmentsRequest, 0, 0, handle_list_reassignments),
]
