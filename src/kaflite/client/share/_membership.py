"""The share-group member: KIP-848's membership machine speaking ShareGroupHeartbeat.

A share group's coordinator assigns partitions with its ``simple`` assignor,
many members to a partition, and the member reconciles them as a KIP-848
member does (``kaflite.client.consumer._membership``: the states, the
heartbeat loop at the interval the coordinator sets, the recovery table for
coordinator errors, FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID rejoining with
epoch 0, max.poll.interval.ms leaving the group). What differs is what a
heartbeat carries: the group, the member id (the client's own, KIP-1082) and
epoch always; the subscribed topic names and the rack when joining, after a
failed heartbeat, or when they changed. A share member owns no partitions in
the KIP-848 sense (it commits no offsets and revokes nothing to anyone), so
nothing acknowledges an assignment and a member leaves with epoch -1 (there
are no static share members).
"""

from __future__ import annotations

from kaflite.client.consumer._membership import (
    LEAVE_EPOCH,
    ConsumerMembership,
    HeartbeatRequest,
    MemberState,
    _Sent,
)
from kaflite.client.pool import COORDINATOR
from kaflite.protocol.messages import ShareGroupHeartbeatRequest

__all__ = ["ShareMembership"]

SHARE_GROUP_HEARTBEAT = 76


class ShareMembership(ConsumerMembership):
    API_KEY = SHARE_GROUP_HEARTBEAT
    API_NAME = "ShareGroupHeartbeat"
    NEEDS = "share groups need Kafka 4.1 or later"
    JOIN_NOTE = "share group"

    def _build(self, version: int) -> tuple[HeartbeatRequest, _Sent]:
        full = self._sent is None or self.state is MemberState.JOINING
        sent = _Sent() if full else self._sent
        assert sent is not None
        req = ShareGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                         member_epoch=self.generation)
        if full:
            req.rack_id = self.rack
        names = tuple(sorted(self.hooks.subscriptions.topics))
        if full or names != sent.names:
            req.subscribed_topic_names = list(names)
        return req, _Sent(self.rebalance_timeout, names, None, None, self._owned)

    def _leave_request(self, epoch: int) -> HeartbeatRequest:
        return ShareGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                          member_epoch=LEAVE_EPOCH)

    def _commit_identity(self) -> tuple[int, str, str | None]:
        return -1, "", None   # a share member commits no offsets

    def roles(self, node_id: int, channel: str) -> list[str]:
        if channel == COORDINATOR and node_id == self.coordinator:
            return [f"share-coordinator ({self.group_id})"]
        return []
