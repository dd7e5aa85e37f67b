"""DescribeQuorum (key 55): the metadata quorum, as ``kafka-metadata-quorum`` shows it.

A KRaft cluster keeps its metadata in the ``__cluster_metadata`` log, replicated
by a Raft quorum of controllers (the voters) and read by every broker (the
observers). kaflite's metadata log has one writer, the controller
(``kaflite.cluster.controller``), which Metadata and DescribeCluster already
report as the lowest live broker, as a combined-mode Kafka node would be: so the
quorum is that one voter, its leader, static (no directory ids, as a quorum
configured by ``controller.quorum.voters``), at the metadata log's one epoch
(``metalog.LEADER_EPOCH``). Its high watermark is the next offset of the
metadata log. Every other live broker is an observer; it holds the records the
controller has written (in one process they are its own; a broker process
replays each batch as it comes), so its log end offset is the controller's.
The leader's own timestamps, and the observers', are the time of the request,
as Kafka reports a leader's. A request for anything but partition 0 of
``__cluster_metadata`` gets UNKNOWN_TOPIC_OR_PARTITION on what it named, as
Kafka's ``KafkaRaftClient`` answers; any broker answers (Kafka's brokers forward
the request to the active controller). Authorization (DESCRIBE on the cluster) is
in ``kaflite.cluster.acl``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.metalog import LEADER_EPOCH
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse
from kaflite.protocol.messages import describe_quorum_response as dq

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "METADATA_TOPIC"]

METADATA_TOPIC = "__cluster_metadata"


def _unknown(req: DescribeQuorumRequest, version: int) -> DescribeQuorumResponse:
    code = errors.UnknownTopicOrPartitionError.code
    message = None if version >= 2 else ""      # error messages: v2 and later
    return DescribeQuorumResponse(error_code=0, error_message=message, topics=[
        dq.TopicData(t.topic_name, [dq.PartitionData(partition_index=p.partition_index,
                                                     error_code=code, error_message=message)
                                    for p in t.partitions])
        for t in req.topics])


async def handle_describe_quorum(broker: Broker, conn: ServerConnection,
                                 header: RequestHeader,
                                 req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if [(t.topic_name, [p.partition_index for p in t.partitions]) for t in req.topics] \
            != [(METADATA_TOPIC, [0])]:
        return _unknown(req, header.request_api_version)
    version = header.request_api_version
    controller = broker.controller
    live = sorted(b.node_id for b in controller.live_brokers())
    leader = live[0] if live else -1
    end = controller.metadata_offset
    now = int(time.time() * 1000) if version >= 1 else -1     # timestamps: v1 and later

    def replica(node: int) -> dq.ReplicaState:
        return dq.ReplicaState(replica_id=node, log_end_offset=end, last_fetch_timestamp=now,
                               last_caught_up_timestamp=now)

    nodes = []          # the voters' endpoints: v2 and later
    info = controller.brokers.get(leader)
    address = info.endpoint(conn.listener.name) if info is not None else None
    if address is not None and version >= 2:
        nodes.append(dq.Node(node_id=leader, listeners=[
            dq.Listener(name=conn.listener.name, host=address[0], port=address[1])]))
    message = None if version >= 2 else ""
    partition = dq.PartitionData(
        partition_index=0, error_code=0, error_message=message, leader_id=leader,
        leader_epoch=LEADER_EPOCH, high_watermark=end,
        current_voters=[replica(leader)] if leader >= 0 else [],
        observers=[replica(n) for n in live if n != leader])
    return DescribeQuorumResponse(error_code=0, error_message=message,
                                  topics=[dq.TopicData(METADATA_TOPIC, [partition])],
                                  nodes=nodes)


HANDLERS = [Handler(DescribeQuorumRequest, 0, 2, handle_describe_quorum)]
