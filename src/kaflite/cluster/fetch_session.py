"""Incremental fetch sessions (KIP-227), the broker's side.

A consumer that fetches many partitions would otherwise resend all of them, and
get all of them back, every few hundred milliseconds. With a session the broker
remembers the partitions and their fetch positions; the client then sends only
what changed and the broker answers only partitions with something to say.

The (session id, epoch) pair in a request decides what happens:

====================  =====================================================
id 0, epoch -1        a plain full fetch; no session
id 0, epoch 0         full fetch that opens a new session (its id is returned)
id X, epoch 0         close session X, then open a new one as above
id X, epoch -1        close session X; this request is a plain full fetch
id X, epoch N > 0     incremental fetch in session X, which must expect epoch N
====================  =====================================================

An unknown id is FETCH_SESSION_ID_NOT_FOUND and a wrong epoch
INVALID_FETCH_SESSION_EPOCH; either way the client starts a new session.

In an incremental response a partition appears only if it returned records, an
error or a diverging epoch, or if its high watermark, last stable offset or log
start offset changed since the session last reported it.
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

__all__ = ["FetchSession", "FetchSessionCache", "SessionPartition"]

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass
class SessionPartition:
    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    # What the session last told the client, to decide what is worth resending.
    reported: tuple[int, int, int] | None = None


@dataclass
class FetchSession:
    session_id: int
    next_epoch: int = 1
    partitions: OrderedDict[tuple[str, int], SessionPartition] = field(
        default_factory=OrderedDict)
    last_used: float = field(default_factory=time.monotonic)


class FetchSessionCache:
    """Sessions of one broker, bounded like ``max.incremental.fetch.session.cache.slots``."""

    def __init__(self, max_sessions: int = 1000, idle_seconds: float = 120.0) -> None:
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.sessions: dict[int, FetchSession] = {}
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def new_session(self) -> FetchSession | None:
        """A fresh session, or None when the cache is full (the client then fetches sessionless)."""
        self._evict_idle()
        if len(self.sessions) >= self.max_sessions:
            return None
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(sid)
        self.sessions[sid] = session
        return session

    def get(self, session_id: int) -> FetchSession | None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.last_used = time.monotonic()
        return session

    def close(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def _evict_idle(self) -> None:
        now = time.monotonic()
        for sid in [s.session_id for s in self.sessions.values()
                    if now - s.last_used > self.idle_seconds]:
            del self.sessions[sid]
