"""Classic group membership and administration.

JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13), DescribeGroups
(15), ListGroups (16) and DeleteGroups (42). The state machine lives in
``kaflite.cluster.groups``; these handlers find the shard that owns the group
(or answer NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS), call it, and shape
the response for the request's version. JoinGroup and SyncGroup responses may
wait for the rest of the group, as Kafka parks them.

Versions follow Kafka 4.4, which serves JoinGroup from v0 (KIP-896 had listed
v0-v1 for removal; Kafka's schema and ApiVersions keep them, as the differential
conformance test against Kafka 4.4 showed). A v0 join has no rebalance timeout:
the session timeout serves, as in Kafka.

DescribeGroups v6 (KIP-1043) answers a group that is not a classic group (unknown,
or of another kind) GROUP_ID_NOT_FOUND with Kafka's message, where earlier versions
say only Dead. DeleteGroups v3 carries an error message beside an error code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from kaflite.cluster.acl import NOT_REQUESTED, SUPPORTED_OPERATIONS
from kaflite.cluster.groups import CoordinatorShard, GroupCoordinator, GroupState, RequestContext
from kaflite.cluster.groups._classic import join_error
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kaflite.protocol.messages import delete_groups_response as dgr
from kaflite.protocol.messages import describe_groups_response as dsr
from kaflite.protocol.messages import leave_group_request as lgq
from kaflite.protocol.messages import list_groups_response as lsr
from kaflite.security.acl import ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "client_host", "shard_for"]

NONE = 0
NOT_FOUND_DESCRIBE_VERSION = 6     # DescribeGroups v6: GROUP_ID_NOT_FOUND (KIP-1043)
# every operation on a group (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS):
# what a cluster without an authorizer reports (with one, the request gate puts the
# principal's own in its place)
GROUP_OPERATIONS = sum(1 << int(op) for op in SUPPORTED_OPERATIONS[ResourceType.GROUP])
D = TypeVar("D")


def coordinator_of(broker: Broker) -> GroupCoordinator:
    coordinator = broker.groups
    if coordinator is None:
        raise errors.CoordinatorNotAvailableError("no group coordinator on this broker")
    return coordinator


def shard_for(broker: Broker, conn: ServerConnection, group_id: str,
              label: bool = True) -> CoordinatorShard:
    """The shard owning ``group_id``; with ``label``, the connection becomes the group's
    coordinator connection in the registry (requests a member sends, not admin ones)."""
    shard = coordinator_of(broker).shard_for(group_id)
    if label:
        conn.info.groups.add(group_id)
    return shard


def describe_each(broker: Broker, conn: ServerConnection, group_ids: Iterable[str],
                  include_operations: bool, failed: Callable[[int, str, int], D],
                  describe: Callable[[CoordinatorShard, str, int], D]) -> list[D]:
    """ConsumerGroupDescribe's and ShareGroupDescribe's loop: each group described by its
    shard, or ``failed(code, group_id, operations)`` (an empty id, or not the coordinator)."""
    ops = GROUP_OPERATIONS if include_operations else NOT_REQUESTED
    out = []
    for gid in group_ids:
        if not gid:
            out.append(failed(errors.InvalidGroupIdError.code, gid, ops))
            continue
        try:
            shard = shard_for(broker, conn, gid, label=False)
        except errors.KafkaError as exc:
            out.append(failed(exc.code, gid, ops))
            continue
        out.append(describe(shard, gid, ops))
    return out


def client_host(conn: ServerConnection) -> str:
    """The peer address as Kafka prints it (``InetAddress.toString``: ``/127.0.0.1``)."""
    host = conn.info.peer.rsplit(":", 1)[0]
    return "/" + host.strip("[]")


def _fix_join(resp: JoinGroupResponse, version: int) -> JoinGroupResponse:
    if version < 7 and resp.protocol_name is None:
        resp.protocol_name = ""
    return resp


async def handle_join_group(broker: Broker, conn: ServerConnection, header: RequestHeader,
                            req: JoinGroupRequest) -> JoinGroupResponse:
    version = header.request_api_version
    try:
        shard = shard_for(broker, conn, req.group_id)
    except errors.KafkaError as exc:
        return _fix_join(join_error(exc.code, req.member_id), version)
    ctx = RequestContext(header.client_id or "", client_host(conn), version)
    modern = shard.consumer_groups.get(req.group_id)
    if modern is not None:
        if modern.members:
            # A consumer group with members serves classic members too (migration).
            return _fix_join(await shard.migration.join(ctx, req, modern), version)
        # Kafka's maybeDeleteEmptyConsumerGroup: the empty consumer group gives way.
        code = await shard.offset_manager.write(shard.consumer.delete_records(modern))
        if code:
            return _fix_join(join_error(code, req.member_id), version)
    resp = await shard.classic.join(ctx, req)
    return _fix_join(resp, version)


async def handle_sync_group(broker: Broker, conn: ServerConnection, header: RequestHeader,
                            req: SyncGroupRequest) -> SyncGroupResponse:
    try:
        shard = shard_for(broker, conn, req.group_id)
    except errors.KafkaError as exc:
        return SyncGroupResponse(error_code=exc.code)
    modern = shard.consumer_groups.get(req.group_id)
    if modern is not None:
        return shard.migration.sync(req, modern)
    return await shard.classic.sync(req)


async def handle_heartbeat(broker: Broker, conn: ServerConnection, header: RequestHeader,
                           req: HeartbeatRequest) -> HeartbeatResponse:
    try:
        shard = shard_for(broker, conn, req.group_id)
    except errors.KafkaError as exc:
        return HeartbeatResponse(error_code=exc.code)
    modern = shard.consumer_groups.get(req.group_id)
    if modern is not None:
        return HeartbeatResponse(error_code=shard.migration.heartbeat(
            modern, req.member_id, req.generation_id, req.group_instance_id))
    return HeartbeatResponse(error_code=shard.classic.heartbeat(
        req.group_id, req.member_id, req.group_instance_id, req.generation_id))


async def handle_leave_group(broker: Broker, conn: ServerConnection, header: RequestHeader,
                             req: LeaveGroupRequest) -> LeaveGroupResponse:
    version = header.request_api_version
    members = req.members if version >= 3 else [lgq.MemberIdentity(member_id=req.member_id)]
    try:
        shard = shard_for(broker, conn, req.group_id)
    except errors.KafkaError as exc:
        return LeaveGroupResponse(error_code=exc.code)
    modern = shard.consumer_groups.get(req.group_id)
    if modern is not None:
        results, written = shard.migration.leave(modern, members)
        top = await written
    else:
        top, results = shard.classic.leave(req.group_id, members)
    if version < 3:
        # One member, one error: the top-level code is the member's (Kafka's getError).
        return LeaveGroupResponse(
            error_code=top or next((r.error_code for r in results if r.error_code), NONE))
    return LeaveGroupResponse(error_code=top, members=results)


def _describe(broker: Broker, conn: ServerConnection, group_id: str,
              operations: int, version: int) -> dsr.DescribedGroup:
    out = dsr.DescribedGroup(error_code=NONE, group_id=group_id, group_state="",
                             protocol_type="", protocol_data="", authorized_operations=operations)
    if not group_id:
        out.error_code = errors.InvalidGroupIdError.code
        return out
    try:
        shard = shard_for(broker, conn, group_id, label=False)
    except errors.KafkaError as exc:
        out.error_code = exc.code
        return out
    group = shard.groups.get(group_id)
    if group is None:
        # Unknown, or a consumer group: DescribeGroups describes classic groups only.
        out.group_state = str(GroupState.DEAD)
        if version >= NOT_FOUND_DESCRIBE_VERSION:     # KIP-1043, as Kafka 4.4 words it
            out.error_code = errors.GroupIdNotFoundError.code
            other = group_id in shard.consumer_groups or group_id in shard.share_groups
            out.error_message = f"Group {group_id} is not a classic group." if other \
                else f"Group {group_id} not found."
        return out
    out.group_state = str(group.state)
    out.protocol_type = group.protocol_type or ""
    # Member metadata and assignments are only meaningful once the group is Stable.
    protocol = group.protocol_name if group.is_in(GroupState.STABLE) else None
    out.protocol_data = protocol or ""
    for m in group.members.values():
        member = dsr.DescribedGroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            client_id=m.client_id, client_host=m.client_host)
        if protocol is not None:
            member.member_metadata = m.metadata(protocol)
            member.member_assignment = m.assignment
        out.members.append(member)
    return out


async def handle_describe_groups(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                 req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    ops = GROUP_OPERATIONS if req.include_authorized_operations else NOT_REQUESTED
    return DescribeGroupsResponse(throttle_time_ms=0,
                                  groups=[_describe(broker, conn, g, ops, header.request_api_version)
                                          for g in req.groups])


async def handle_list_groups(broker: Broker, conn: ServerConnection, header: RequestHeader,
                             req: ListGroupsRequest) -> ListGroupsResponse:
    try:
        coordinator = coordinator_of(broker)
    except errors.KafkaError as exc:
        return ListGroupsResponse(error_code=exc.code)
    states = {s.lower() for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}
    listed = []
    if not types or "consumer" in types:
        for shard in coordinator.active_shards():
            for modern in shard.consumer_groups.values():
                if states and str(modern.state).lower() not in states:
                    continue
                listed.append(lsr.ListedGroup(group_id=modern.group_id, protocol_type="consumer",
                                              group_state=str(modern.state),
                                              group_type="consumer"))
    if not types or "classic" in types:
        for shard in coordinator.active_shards():
            for group in shard.groups.values():
                if states and str(group.state).lower() not in states:
                    continue
                listed.append(lsr.ListedGroup(group_id=group.group_id,
                                              protocol_type=group.protocol_type or "",
                                              group_state=str(group.state), group_type="classic"))
    if not types or "share" in types:
        for shard in coordinator.active_shards():
            for share in shard.share_groups.values():
                if states and share.state.lower() not in states:
                    continue
                listed.append(lsr.ListedGroup(group_id=share.group_id, protocol_type="share",
                                              group_state=share.state, group_type="share"))
    listed.sort(key=lambda g: g.group_id)
    error = errors.CoordinatorLoadInProgressError.code if coordinator.loading else NONE
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=listed)


async def handle_delete_groups(broker: Broker, conn: ServerConnection, header: RequestHeader,
                               req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results: dict[str, int] = {}
    messages: dict[str, str] = {}   # v3: why, where a coordinator error says (as Kafka's ApiError)
    by_shard: dict[int, tuple[CoordinatorShard, list[str]]] = {}
    for gid in req.groups_names:
        if not gid:
            results[gid] = errors.InvalidGroupIdError.code
            continue
        try:
            shard = shard_for(broker, conn, gid, label=False)
        except errors.KafkaError as exc:
            results[gid] = exc.code
            messages[gid] = str(exc) or exc.name
            continue
        if gid in shard.share_groups:
            results[gid] = await delete_share_group(broker, shard, gid)
            continue
        by_shard.setdefault(shard.index, (shard, []))[1].append(gid)
    done = await asyncio.gather(*(s.offset_manager.delete_groups(ids)
                                  for s, ids in by_shard.values()))
    for part in done:
        results.update(part)
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        dgr.DeletableGroupResult(group_id=gid, error_code=results[gid],
                                 error_message=messages.get(gid) if results[gid] else None)
        for gid in dict.fromkeys(req.groups_names)])


async def delete_share_group(broker: Broker, shard: CoordinatorShard, group_id: str) -> int:
    """DeleteGroups of a share group: it must be empty; its share-partition state in
    ``__share_group_state`` goes too (DeleteShareGroupState)."""
    try:
        group = shard.share.share_group(group_id)
        initialized = {t: set(ps) for t, ps in group.initialized.items()}
        code = await shard.share.delete(group_id)
    except errors.KafkaError as exc:
        return exc.code
    if broker.share is not None:
        for topic_id, partitions in initialized.items():
            for index in sorted(partitions):
                await broker.share.forget(group_id, topic_id, index)
    return code


HANDLERS = [
    Handler(JoinGroupRequest, 0, 9, handle_join_group),
    Handler(HeartbeatRequest, 0, 4, handle_heartbeat),
    Handler(LeaveGroupRequest, 0, 5, handle_leave_group),
    Handler(SyncGroupRequest, 0, 5, handle_sync_group),
    Handler(DescribeGroupsRequest, 0, NOT_FOUND_DESCRIBE_VERSION, handle_describe_groups),
    Handler(ListGroupsRequest, 0, 5, handle_list_groups),
    Handler(DeleteGroupsRequest, 0, 3, handle_delete_groups),
]
