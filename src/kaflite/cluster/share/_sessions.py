"""Share sessions (KIP-932), as Kafka's ``ShareSessionCache`` keeps them.

A share consumer holds one share session on each partition leader it fetches
from, keyed by (group id, member id). Its epoch works as a fetch session's:
0 opens a session (the request names every partition it wants), each later
request carries the epoch the broker expects next (it names only partitions to
add, and ``ForgottenTopicsData`` those to drop), and -1 closes it. The errors
are Kafka's: SHARE_SESSION_NOT_FOUND for a session this broker does not have,
INVALID_SHARE_SESSION_EPOCH for an epoch out of step, and
SHARE_SESSION_LIMIT_REACHED when the cache is full (``group.share.max.share.sessions``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kaflite.protocol import errors

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "SHARE_SESSION_LIMIT_REACHED",
    "ShareSession",
    "ShareSessionCache",
]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SHARE_SESSION_LIMIT_REACHED = 133   # Kafka 4.1's error code (not in the 4.0 error table)

TopicPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1                     # the epoch the next request must carry
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set
    client: str = ""
    connection_id: int = -1            # the connection it was opened on (see ``of_connection``)


class ShareSessionError(errors.KafkaError):
    """SHARE_SESSION_LIMIT_REACHED, which the 4.0 error table does not have."""

    code = SHARE_SESSION_LIMIT_REACHED
    name = "SHARE_SESSION_LIMIT_REACHED"
    retriable = True


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, client: str = "", connection_id: int = -1
             ) -> tuple[ShareSession, ShareSession | None]:
        """Epoch 0: a new session, replacing this member's old one (returned, to be released)."""
        key = (group_id, member_id)
        old = self.sessions.pop(key, None)
        if old is None and len(self.sessions) >= self.max_sessions:
            raise ShareSessionError(
                f"The share session cache is full ({self.max_sessions} sessions).")
        session = ShareSession(group_id, member_id, client=client, connection_id=connection_id)
        self.sessions[key] = session
        return session, old

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """A request at ``epoch`` > 0 or -1: the session it continues, or Kafka's error."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise errors.ShareSessionNotFoundError(
                f"The share session for member {member_id} of group {group_id} was not found.")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise errors.InvalidShareSessionEpochError(
                f"The share session epoch {epoch} is invalid, expected {session.epoch}.")
        return session

    def advance(self, session: ShareSession) -> None:
        session.epoch = next_epoch(session.epoch)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def of_connection(self, connection_id: int) -> list[ShareSession]:
        """The sessions opened on a connection: they end with it (Kafka 4.1 ties a share
        session to its connection, so a vanished consumer's records come back at once)."""
        return [s for s in self.sessions.values() if s.connection_id == connection_id]

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [s for (g, _), s in self.sessions.items() if g == group_id]
