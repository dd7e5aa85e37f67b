"""ShareGroupHeartbeat: share groups (KIP-932) on the group coordinator.

Theory of operation
-------------------
A share group has the epochs of a KIP-848 consumer group (``_consumer_group``):
the group epoch moves whenever a member joins, leaves or changes its
subscription, or a subscribed topic changes; the target assignment is computed
for a group epoch (the assignment epoch); each member carries the epoch of the
assignment it was given. What differs is that a partition may have many
members at once (records, not partitions, are what members own), so nothing is
ever revoked: a member takes its new target assignment, and the epoch that
goes with it, on its next heartbeat.

The ``simple`` assignor (Kafka's ``SimpleAssignor``) spreads, topic by topic, the
partitions over the members subscribed to it: with no more members than
partitions each partition goes to one member (round robin); with more members
than partitions, each member gets one partition and each partition is shared by
several.

A member's session (``group.share.session.timeout.ms``, or the group's
``share.session.timeout.ms``) fences it when its heartbeats stop. The records it
held are released when their acquisition locks expire on the partition
leaders, or at once when its share sessions close.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace

from kaflite.cluster.groups import _share_records as records
from kaflite.cluster.groups._consumer import TopicView, new_member_id
from kaflite.cluster.groups._consumer_group import Assignment, TopicMeta
from kaflite.cluster.groups._rebalance import NONE, Record, WriteFn
from kaflite.cluster.groups._share_group import ShareGroup, ShareMember, simple_assign
from kaflite.cluster.groups._timer import Timer
from kaflite.cluster.share._config import ShareConfig, ShareGroupSettings
from kaflite.protocol import errors
from kaflite.protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from kaflite.protocol.messages import share_group_heartbeat_response as sghr

__all__ = ["ShareGroup", "ShareGroupManager", "ShareMember", "simple_assign"]

log = logging.getLogger("kaflite.cluster.groups")

LEAVE_EPOCH = -1


def session_key(group_id: str, member_id: str) -> str:
    return f"share-session-{group_id}-{member_id}"


class ShareGroupManager:
    def __init__(self, groups: dict[str, ShareGroup], other_group: Callable[[str], bool],
                 timer: Timer, config: ShareConfig, topics: TopicView, write: WriteFn,
                 settings: Callable[[str], ShareGroupSettings] | None = None) -> None:
        self.groups = groups
        self.write = write
        self.other_group = other_group     # is this id a classic or consumer group?
        self.timer = timer
        self.config = config
        self.topics = topics
        self.settings = settings or (lambda group_id: config.defaults)

    def share_group(self, group_id: str, create: bool = False) -> ShareGroup:
        """The share group ``group_id``; with ``create``, a new empty one if there is no
        group of that id (Kafka's ``getOrMaybeCreateShareGroup``: AlterShareGroupOffsets
        creates the group whose offsets it sets)."""
        group = self.groups.get(group_id)
        if group is None:
            if self.other_group(group_id):
                raise errors.GroupIdNotFoundError(f"Group {group_id} is not a share group.")
            if not create:
                raise errors.GroupIdNotFoundError(f"Share group {group_id} not found.")
            group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def drop_if_blank(self, group_id: str) -> None:
        """Forget a group that ``share_group(create=True)`` made if nothing was recorded for
        it: no member ever joined and no partition was initialised."""
        group = self.groups.get(group_id)
        if group is not None and group.group_epoch == 0 and not group.members \
                and not group.initialized:
            del self.groups[group_id]

    # -- ShareGroupHeartbeat ----------------------------------------------------------------------
    def heartbeat(self, client_id: str, client_host: str, req: ShareGroupHeartbeatRequest
                  ) -> asyncio.Future[ShareGroupHeartbeatResponse]:
        """The answer, once the records the heartbeat made are in ``__consumer_offsets``."""
        fut: asyncio.Future[ShareGroupHeartbeatResponse] = \
            asyncio.get_running_loop().create_future()
        out: list[Record] = []
        try:
            self.validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                resp = self._leave(req.group_id, req.member_id, out)
            else:
                resp = self._heartbeat(client_id, client_host, req, out)
        except errors.KafkaError as exc:
            fut.set_result(ShareGroupHeartbeatResponse(error_code=exc.code,
                                                       error_message=exc.message))
            return fut

        def done(f: asyncio.Future[int]) -> None:
            if not fut.done():
                code = f.result()
                fut.set_result(resp if code == NONE else
                               ShareGroupHeartbeatResponse(error_code=code))

        self._write(out).add_done_callback(done)
        return fut

    def _write(self, out: list[Record]) -> asyncio.Future[int]:
        if not out:
            fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            fut.set_result(NONE)
            return fut
        return self.write(out)

    @staticmethod
    def validate(req: ShareGroupHeartbeatRequest) -> None:
        """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``."""
        if not req.group_id.strip():
            raise errors.InvalidRequestError("GroupId can't be empty.")
        if not req.member_id.strip():
            raise errors.InvalidRequestError("MemberId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise errors.InvalidRequestError("RackId can't be empty.")
        if req.member_epoch == 0:
            if not req.subscribed_topic_names:
                raise errors.InvalidRequestError("SubscribedTopicNames must be set in first "
                                                 "request.")
        elif req.member_epoch < LEAVE_EPOCH:
            raise errors.InvalidRequestError("MemberEpoch is invalid.")

    def _heartbeat(self, client_id: str, client_host: str, req: ShareGroupHeartbeatRequest,
                   out: list[Record]) -> ShareGroupHeartbeatResponse:
        gid, mid = req.group_id, req.member_id or new_member_id()
        joining = req.member_epoch == 0
        group = self.groups.get(gid)
        if group is None:
            if not joining or self.other_group(gid):
                self.share_group(gid)   # raises
            group = ShareGroup(gid)
        member = group.members.get(mid)
        if member is None:
            if not joining:
                raise errors.UnknownMemberIdError(
                    f"Member {mid} is not a member of group {gid}.")
            if len(group.members) >= self.config.max_size:
                raise errors.GroupMaxSizeReachedError(
                    f"The share group has reached its maximum capacity of "
                    f"{self.config.max_size} members.")
            member = ShareMember(mid)
        elif not joining and req.member_epoch != member.member_epoch and \
                req.member_epoch != member.previous_member_epoch:
            raise errors.FencedMemberEpochError(
                f"The share group member has a {'greater' if req.member_epoch > member.member_epoch else 'smaller'} "
                f"member epoch ({req.member_epoch}) than the one known by the group coordinator "
                f"({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        self.groups[gid] = group
        names = member.subscribed_topic_names if req.subscribed_topic_names is None \
            else tuple(sorted(set(req.subscribed_topic_names)))
        updated = replace(member, rack_id=req.rack_id if req.rack_id is not None
                          else member.rack_id, client_id=client_id, client_host=client_host,
                          subscribed_topic_names=names)
        bump = mid not in group.members or names != member.subscribed_topic_names
        before = group.members.get(mid)
        if before != updated:
            out.append(records.member_metadata(gid, updated).encode())
        group.members[mid] = updated
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            out.append(records.group_epoch(gid, group.group_epoch).encode())
            log.info("share group %s: group epoch bumped to %s", gid, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group, out)
        member = group.members[mid]
        if member.member_epoch != group.assignment_epoch:
            member = replace(member, previous_member_epoch=member.member_epoch,
                             member_epoch=group.assignment_epoch,
                             assigned=group.target.get(mid, {}))
            group.members[mid] = member
            out.append(records.current_assignment(gid, member).encode())
        settings = self.settings(gid)
        self.timer.schedule(session_key(gid, mid), settings.session_timeout_ms,
                            self._session_expiry(gid, mid))
        resp = ShareGroupHeartbeatResponse(member_id=mid, member_epoch=member.member_epoch,
                                           heartbeat_interval_ms=settings.heartbeat_interval_ms)
        if joining or before is None or _norm(before.assigned) != _norm(member.assigned):
            resp.assignment = sghr.Assignment(topic_partitions=[
                sghr.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(member.assigned.items()) if ps])
        return resp

    def _subscription_metadata(self, group: ShareGroup) -> dict[str, TopicMeta]:
        names: set[str] = set()
        for m in group.members.values():
            names.update(m.subscribed_topic_names)
        out = {}
        for name in sorted(names):
            meta = self.topics.lookup(name)
            if meta is not None:
                out[name] = meta
        return out

    def _update_target(self, group: ShareGroup, out: list[Record] | None) -> None:
        """A new target assignment; the partitions it names are the group's from now on
        (ShareGroupStatePartitionMetadata: their share state exists or is about to)."""
        meta = group.subscription_metadata
        subs = {m.member_id: frozenset(meta[n].topic_id for n in m.subscribed_topic_names
                                       if n in meta) for m in group.members.values()}
        group.target = simple_assign(subs, {t.topic_id: t.partitions for t in meta.values()})
        group.assignment_epoch = group.group_epoch
        grown = False
        for assignment in group.target.values():
            for topic_id, ps in assignment.items():
                have = group.initialized.setdefault(topic_id, set())
                if not ps <= have:
                    have |= ps
                    grown = True
        if grown and out is not None:
            names = {t.topic_id: t.name for t in meta.values()}
            out.append(records.state_partitions(group.group_id, group.initialized,
                                                names).encode())

    # -- leaving and fencing ------------------------------------------------------------------------
    def _leave(self, group_id: str, member_id: str,
               out: list[Record]) -> ShareGroupHeartbeatResponse:
        group = self.share_group(group_id)
        if member_id not in group.members:
            raise errors.UnknownMemberIdError(
                f"Member {member_id} is not a member of group {group_id}.")
        log.info("share group %s: member %s left", group_id, member_id)
        self._remove(group, member_id, out)
        return ShareGroupHeartbeatResponse(member_id=member_id, member_epoch=LEAVE_EPOCH)

    def _remove(self, group: ShareGroup, member_id: str, out: list[Record]) -> None:
        group.members.pop(member_id, None)
        group.target.pop(member_id, None)
        self.timer.cancel(session_key(group.group_id, member_id))
        out.extend(r.encode() for r in records.member_tombstones(group.group_id, member_id))
        group.subscription_metadata = self._subscription_metadata(group)
        group.group_epoch += 1
        out.append(records.group_epoch(group.group_id, group.group_epoch).encode())
        self._update_target(group, out)

    def _session_expiry(self, group_id: str, member_id: str) -> Callable[[], None]:
        def fire() -> None:
            self.fence(group_id, member_id, "the member session expired.")
        return fire

    def fence(self, group_id: str, member_id: str, reason: str) -> bool:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return False
        log.info("share group %s: member %s fenced because %s", group_id, member_id, reason)
        out: list[Record] = []
        self._remove(group, member_id, out)
        self._write(out).add_done_callback(lambda f: _log_write(f, group_id, reason))
        return True

    def delete(self, group_id: str) -> asyncio.Future[int]:
        """DeleteGroups: only an empty group goes (NON_EMPTY_GROUP otherwise)."""
        group = self.share_group(group_id)
        if group.members:
            raise errors.NonEmptyGroupError(f"Share group {group_id} is not empty.")
        del self.groups[group_id]
        return self._write([records.state_partitions(group_id, None, {}).encode(),
                            records.group_epoch(group_id, None).encode()])

    def record_initialized(self, group: ShareGroup) -> asyncio.Future[int]:
        """Write the group's initialized partitions (after the offset admin APIs)."""
        names = {t: n for t, n in ((m.topic_id, m.name)
                                   for m in group.subscription_metadata.values())}
        for topic_id in group.initialized:
            if topic_id not in names:
                names[topic_id] = self.topics.name_of(topic_id) or ""
        return self._write([records.state_partitions(group.group_id, group.initialized,
                                                     names).encode()])

    def on_loaded(self) -> None:
        """The shard loaded: targets are computed again, member sessions start."""
        for gid, group in self.groups.items():
            group.subscription_metadata = self._subscription_metadata(group)
            self._update_target(group, None)
            settings = self.settings(gid)
            for mid in group.members:
                self.timer.schedule(session_key(gid, mid), settings.session_timeout_ms,
                                    self._session_expiry(gid, mid))

    def close(self) -> None:
        for group in self.groups.values():
            for mid in group.members:
                self.timer.cancel(session_key(group.group_id, mid))


def _log_write(f: asyncio.Future[int], group_id: str, what: str) -> None:
    if f.result() != NONE:
        log.warning("share group %s: writing (%s) failed with error %s", group_id, what,
                    f.result())


def _norm(a: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: ps for t, ps in a.items() if ps}
