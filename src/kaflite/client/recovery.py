"""The recovery table: what the client does for each error a broker returns.

Every error code that means "the cluster changed" is a transition in the
client's state machine. The table below is the single place that decides
which transition an error triggers; the producer, the fetcher and the group
member look their errors up here instead of each keeping its own list::

    NOT_LEADER_OR_FOLLOWER        refresh metadata and reroute
    LEADER_NOT_AVAILABLE          back off (an election is in progress), then refresh
    NOT_COORDINATOR               FindCoordinator again
    COORDINATOR_NOT_AVAILABLE     FindCoordinator again
    COORDINATOR_LOAD_IN_PROGRESS  back off, keep the coordinator
    ILLEGAL_GENERATION            rejoin the group
    UNKNOWN_MEMBER_ID             rejoin the group (with a fresh member id)
    REBALANCE_IN_PROGRESS         rejoin the group
    FENCED_INSTANCE_ID            fatal: raised to the application
    STALE_MEMBER_EPOCH            (KIP-848, on OffsetCommit/OffsetFetch) retry once the
                                  next heartbeat has brought the new member epoch
    FENCED_MEMBER_EPOCH           (KIP-848) the partitions are lost: rejoin with epoch 0
                                  (UNKNOWN_MEMBER_ID does the same in a KIP-848 group)
    UNRELEASED_INSTANCE_ID        (KIP-848) fatal: another member holds the instance id
    OFFSET_OUT_OF_RANGE           apply auto.offset.reset, or raise
    TOPIC_AUTHORIZATION_FAILED    raised to the application (GROUP_, CLUSTER_ and
                                  TRANSACTIONAL_ID_AUTHORIZATION_FAILED too)

Errors not in the table are retried with back-off when Kafka marks them
retriable, and raised otherwise.
"""

from __future__ import annotations

import enum
import random

from kaflite.protocol import errors as E

__all__ = ["RECOVERY", "Action", "action_for", "backoff_delay"]


class Action(enum.Enum):
    NONE = "none"
    REFRESH_METADATA = "refresh metadata and reroute"
    BACKOFF_REFRESH = "back off, then refresh metadata"
    REDISCOVER_COORDINATOR = "find the coordinator again"
    BACKOFF = "back off and retry"
    REJOIN = "rejoin the group"
    RESET_MEMBER = "rejoin the group with a new member id"
    RESET_OFFSET = "apply auto.offset.reset"
    FATAL = "raise to the application (fatal)"
    RAISE = "raise to the application"
    BUMP_EPOCH = "bump the producer epoch and retry"
    AWAIT_EPOCH = "retry with the member epoch the next heartbeat brings"
    FENCED = "lose the partitions and rejoin with member epoch 0"


RECOVERY: dict[int, Action] = {
    0: Action.NONE,
    E.NotLeaderOrFollowerError.code: Action.REFRESH_METADATA,
    E.UnknownTopicOrPartitionError.code: Action.REFRESH_METADATA,
    E.FencedLeaderEpochError.code: Action.REFRESH_METADATA,
    E.UnknownLeaderEpochError.code: Action.BACKOFF_REFRESH,
    E.LeaderNotAvailableError.code: Action.BACKOFF_REFRESH,
    E.ReplicaNotAvailableError.code: Action.BACKOFF_REFRESH,
    E.KafkaStorageError.code: Action.REFRESH_METADATA,
    E.UnknownTopicIdError.code: Action.REFRESH_METADATA,
    E.InconsistentTopicIdError.code: Action.REFRESH_METADATA,
    E.NotCoordinatorError.code: Action.REDISCOVER_COORDINATOR,
    E.CoordinatorNotAvailableError.code: Action.REDISCOVER_COORDINATOR,
    E.CoordinatorLoadInProgressError.code: Action.BACKOFF,
    E.IllegalGenerationError.code: Action.REJOIN,
    E.RebalanceInProgressError.code: Action.REJOIN,
    E.UnknownMemberIdError.code: Action.RESET_MEMBER,
    E.FencedInstanceIdError.code: Action.FATAL,
    E.StaleMemberEpochError.code: Action.AWAIT_EPOCH,
    E.FencedMemberEpochError.code: Action.FENCED,
    E.UnreleasedInstanceIdError.code: Action.FATAL,
    E.OffsetOutOfRangeError.code: Action.RESET_OFFSET,
    E.TopicAuthorizationFailedError.code: Action.RAISE,
    E.GroupAuthorizationFailedError.code: Action.RAISE,
    E.ClusterAuthorizationFailedError.code: Action.RAISE,
    E.TransactionalIdAuthorizationFailedError.code: Action.RAISE,
    E.UnknownProducerIdError.code: Action.BUMP_EPOCH,
    E.OutOfOrderSequenceNumberError.code: Action.BUMP_EPOCH,
    E.InvalidProducerEpochError.code: Action.FATAL,
    E.ProducerFencedError.code: Action.FATAL,
    E.RequestTimedOutError.code: Action.BACKOFF,
    E.NotEnoughReplicasError.code: Action.BACKOFF,
    E.NotEnoughReplicasAfterAppendError.code: Action.BACKOFF,
    E.ThrottlingQuotaExceededError.code: Action.BACKOFF,
}


def action_for(code: int) -> Action:
    """The transition for an error code (see the table above)."""
    action = RECOVERY.get(code)
    if action is not None:
        return action
    cls = E.error_class(code)
    return Action.BACKOFF if getattr(cls, "retriable", False) else Action.RAISE


def error_name(code: int) -> str:
    return getattr(E.error_class(code), "name", f"ERROR_{code}")


def backoff_delay(base_ms: int, max_ms: int, attempts: int) -> float:
    """Seconds to wait before retry number ``attempts`` (1 for the first retry).

    Java's ``ExponentialBackoff`` (KIP-580): ``base * 2**(attempts-1)``, capped at
    ``max`` (never below ``base``), with ±20 % jitter so that clients that failed
    together do not retry together.
    """
    top = max(max_ms, base_ms)
    term = base_ms * 2.0 ** max(attempts - 1, 0)
    return min(term * random.uniform(0.8, 1.2), top) / 1000
