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

What an incremental fetch reads is O(partitions that changed), not O(session):
a session watches the partitions it holds (``Partition.watch``), and each of
them marks itself in the session's ``dirty`` set when it changes (an append, a
high watermark, a leadership change: whatever wakes a long-polling fetch). A
fetch reads the partitions it names, the dirty ones and the ones still pending
from its last answer (data left to read, an error, a follower outside the ISR),
and its long poll waits on the session alone, not on a future per partition.
A follower's session also stands for its position in the partitions it holds
but does not name again: a follower whose recorded position is the leader's log
end counts as caught up at each fetch of its session (``fetched_at_ms``, read by
the ISR check), so an idle partition's follower stays in the ISR without the
partition being read. What does not wake a fetch at all (retention moving a log
start) is picked up by a read of the whole session every ``FULL_SCAN_S``, and at
once after an ACL change (a partition the session holds may be denied now, which
Kafka reports at the next fetch: it authorizes every partition of a session). With
thousands of idle partitions per follower, this is what keeps replication from
costing the event loop O(partitions) per produce, and per second (issue 36).
"""

from __future__ import annotations

import asyncio
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


@dataclass(eq=False)
class FetchSession:
    session_id: int
    next_epoch: int = 1
    partitions: OrderedDict[tuple[str, int], SessionPartition] = field(
        default_factory=OrderedDict)
    last_used: float = field(default_factory=time.monotonic)
    # partitions that changed (or still have something to say) since the last read
    dirty: set[tuple[str, int]] = field(default_factory=set)
    next_full_scan: float = 0.0        # monotonic time of the next read of every partition
    acl_version: int = -1              # the ACLs' version at the last read of every partition
    closed: bool = False
    _waker: asyncio.Future[None] | None = None

    def mark(self, tp: tuple[str, int]) -> bool:
        """A watched partition changed; False once the session is gone (stop watching)."""
        if self.closed:
            return False
        self.dirty.add(tp)
        waker = self._waker
        if waker is not None and not waker.done():
            waker.set_result(None)
        return True

    def fetched_at_ms(self, tp: tuple[str, int]) -> float | None:
        if self.closed or tp not in self.partitions:
            return None
        return self.last_used * 1000

    def changed(self) -> asyncio.Future[None]:
        """A future that a ``mark`` (or the session's end) completes: the long poll's wait."""
        self._waker = asyncio.get_running_loop().create_future()
        return self._waker

    def close(self) -> None:
        self.closed = True
        self.partitions.clear()
        self.dirty.clear()
        if self._waker is not None and not self._waker.done():
            self._waker.set_result(None)

    def targets(self, extra: list[tuple[str, int]], everything: bool) -> list[SessionPartition]:
        """What the next read covers: every partition, or the dirty ones and ``extra``
        (in key order, so a topic's partitions come together); the dirty set is taken."""
        if everything:
            self.dirty.clear()
            return list(self.partitions.values())
        keys, self.dirty = self.dirty, set()
        keys.update(extra)
        parts = self.partitions
        return [parts[k] for k in sorted(keys) if k in parts]


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
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def clear(self) -> None:
        """End every session (the broker stops: Kafka keeps them in memory only)."""
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()

    def _evict_idle(self) -> None:
        now = time.monotonic()
        for sid in [s.session_id for s in self.sessions.values()
                    if now - s.last_used > self.idle_seconds]:
            self.sessions.pop(sid).close()
