"""Checks on a KIP-848 member's requests: validity, member lookup, epochs, static members, offsets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from kaflite.cluster.groups._consumer_group import ConsumerGroup, ConsumerMember, TopicMeta
from kaflite.cluster.groups._reconcile import Owned
from kaflite.cluster.groups._regex import compile_regex
from kaflite.protocol import errors
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest

__all__ = [
    "GENERATED_MEMBER_ID_VERSION",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "PartitionCheck",
    "check_epoch",
    "find_member",
    "known_static_member",
    "refused_code",
    "validate_heartbeat",
    "validate_member_epoch",
    "validate_offset_commit",
    "validate_offset_fetch",
]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
GENERATED_MEMBER_ID_VERSION = 1  # KIP-1082: from v1 the client generates its member id

# Kafka's ``CommitPartitionValidator``: raises the error of one committed partition.
PartitionCheck = Callable[[str, int], None]


def refused_code(check: PartitionCheck | None, topic: str, partition: int) -> int:
    """The error code ``check`` gives the partition (0 when it may be committed)."""
    if check is not None:
        try:
            check(topic, partition)
        except errors.KafkaError as exc:
            return exc.code
    return 0


def validate_heartbeat(req: ConsumerGroupHeartbeatRequest, version: int,
                       assignors: Sequence[str]) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (INVALID_REQUEST), and
    the server assignor one of ``assignors`` (UNSUPPORTED_ASSIGNOR)."""
    def invalid(message: str) -> errors.KafkaError:
        return errors.InvalidRequestError(message)

    if (version >= GENERATED_MEMBER_ID_VERSION or req.member_epoch > 0 \
            or req.member_epoch == LEAVE_EPOCH) and not req.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not req.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id.strip():
        raise invalid("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                          "non-null when (re-)joining.")
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if req.subscribed_topic_regex:
        compile_regex(req.subscribed_topic_regex)
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise errors.UnsupportedAssignorError(
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.")


def known_static_member(group: ConsumerGroup, member_id: str, instance_id: str) -> ConsumerMember:
    """The member holding ``instance_id``, which must be ``member_id`` (Kafka's
    ``throwIfStaticMemberIsUnknown`` and ``throwIfInstanceIdIsFenced``)."""
    member = group.static_member(instance_id)
    if member is None:
        raise errors.UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise errors.FencedInstanceIdError(
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{member.member_id}.")
    return member


def check_epoch(member: ConsumerMember, received: int, owned: Owned) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``. Epoch 0 is a member that
    lost its partitions (fenced, or it gave up on an unreachable coordinator) rejoining
    under its own member id: it is let in, as Kafka does since KAFKA-19233 (4.2). It
    reports owning nothing, so its reconciliation starts over from its target. Fencing
    it again would leave it out until its old session expired, which a coordinator that
    keeps moving (each move reloads the group and restarts every session) never lets
    happen."""
    if received == 0:
        return
    if received > member.member_epoch:
        raise errors.FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin.")
    if received < member.member_epoch:
        subset = owned is not None and all(
            ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
        if received != member.previous_member_epoch or not subset:
            raise errors.FencedMemberEpochError(
                f"The consumer group member has a smaller member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member "
                "must abandon all its partitions and rejoin.")


def find_member(group: ConsumerGroup, member_id: str, req: ConsumerGroupHeartbeatRequest,
                owned: Owned) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The member this heartbeat is from, and the static member it replaces, if any."""
    joining = req.member_epoch == 0
    instance_id = req.instance_id
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise errors.UnknownMemberIdError(
                    f"Member {member_id} is not a member of group {group.group_id}.")
            return ConsumerMember(member_id), None
        check_epoch(member, req.member_epoch, owned)
        return member, None
    existing = group.static_member(instance_id)
    if joining:
        if existing is None:
            return group.members.get(member_id) or ConsumerMember(member_id), None
        if not existing.uses_classic_protocol and existing.member_epoch != STATIC_LEAVE_EPOCH:
            raise errors.UnreleasedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} cannot join the "
                f"group because the instance id is owned by {existing.member_id} member.")
        return replace(existing, member_id=member_id, member_epoch=0,
                       previous_member_epoch=0), existing
    existing = known_static_member(group, member_id, instance_id)
    check_epoch(existing, req.member_epoch, owned)
    return existing, None


def validate_offset_commit(group: ConsumerGroup, member_id: str, epoch: int, api_version: int,
                           transactional: bool, instance_id: str | None = None,
                           lookup: Callable[[str], TopicMeta | None] = lambda name: None
                           ) -> PartitionCheck | None:
    """Kafka 4.4's ``ConsumerGroup.validateOffsetCommit``: an error for the whole request is
    raised; a commit with an older member epoch gets a check for each partition (None: every
    partition may be committed). ``lookup`` finds a committed topic's id by its name."""
    if epoch < 0 and not group.members:
        return None
    if transactional and epoch == -1 and not member_id and instance_id is None:
        return None   # TxnOffsetCommit v0-v2 carry no member fields: Kafka 4.4 takes them
    member = group.members.get(member_id)
    if member is None:
        raise errors.UnknownMemberIdError(
            f"Member {member_id} is not a member of group {group.group_id}.")
    if not transactional and member.classic is None and api_version < 9:
        raise errors.UnsupportedVersionError(
            "OffsetCommit version 9 or above must be used by members using the modern "
            "group protocol")
    if epoch == member.member_epoch:
        return None
    error = errors.IllegalGenerationError if member.classic is not None \
        else errors.StaleMemberEpochError
    noun = "generation id" if member.classic is not None else "member epoch"
    if epoch > member.member_epoch:
        raise error(f"Received {noun} {epoch} is newer than current member epoch "
                    f"{member.member_epoch}.")

    def check(topic: str, partition: int) -> None:
        # A commit that a reconciliation overtook: it stands for the partitions the member
        # held since that epoch or before (Kafka 4.4, AssignmentEpochs).
        meta = lookup(topic)
        given = None if meta is None else member.assignment_epoch(meta.topic_id, partition)
        if given is None:
            raise error(f"Partition {topic}-{partition} is not assigned or pending revocation "
                        "for member.")
        if epoch < given:
            raise error(f"Received {noun} {epoch} is older than assignment epoch {given} for "
                        f"partition {topic}-{partition}.")

    return check


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, epoch: int) -> None:
    if member_id is None and epoch < 0:
        return
    member = group.members.get(member_id or "")
    if member is None:
        raise errors.UnknownMemberIdError(
            f"Member {member_id} is not a member of group {group.group_id}.")
    validate_member_epoch(member, epoch)


def validate_member_epoch(member: ConsumerMember, epoch: int) -> None:
    if epoch != member.member_epoch:
        if member.classic is not None:
            raise errors.IllegalGenerationError(
                f"The received generation id {epoch} does not match the expected member "
                f"epoch {member.member_epoch}.")
        raise errors.StaleMemberEpochError(
            f"The received member epoch {epoch} does not match the expected member epoch "
            f"{member.member_epoch}.")
