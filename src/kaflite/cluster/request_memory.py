"""One broker's memory for requests in flight, bounded (``queued.max.request.bytes``).

Kafka's SocketServer draws the buffer of every request it reads from one memory
pool, and stops reading from connections while the pool is empty, until
requests are done and their memory is back. kaflite does the same:

* a connection is charged for what it holds: the buffer of the frame it is
  receiving (``FrameDecoder.held``, which grows only as the bytes arrive) and
  the complete frames queued for its handler, until each has been handled;
* while the pool is full, a connection that holds at least ``SMALL`` bytes
  and asks for more stops reading (``pause_reading``: TCP back-pressure on its
  client), and all paused connections read again as soon as memory is returned
  and the pool is below its limit. Connections with only small requests (they
  fit the decoder's shared receive buffer) go on, so that a few large senders
  cannot stall everyone's Metadata and heartbeats;
* the pool is not strict (Kafka's ``SimpleMemoryPool`` is not either): a
  frame larger than the whole pool still gets through. If every connection
  that holds memory is paused, the one that waited longest reads on, and is
  not paused again until it holds nothing (its request was handled), so
  partly received frames can never wait for each other for ever.

A connection's buffer grows before the pool sees it (in ``get_buffer``, which
must hand out room), so the pool can be exceeded by one growth step of each
reading connection, plus the frame of the one let through.

The limit is Kafka's config name. Kafka's default is -1 (no limit); kaflite's
is 256 MiB, because its brokers share a process with tests and applications.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["DEFAULT_LIMIT", "SMALL", "Reader", "RequestMemory"]

DEFAULT_LIMIT = 256 * 1024 * 1024
SMALL = 1024 * 1024   # a connection holding less is never paused


class Reader(Protocol):
    """A connection whose reading can be paused (an asyncio transport's owner)."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class RequestMemory:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit          # <= 0: unbounded
        self.used = 0
        self.pauses = 0             # times a connection was made to wait, for observation
        self._held: dict[Reader, int] = {}
        self._paused: dict[Reader, None] = {}   # in the order they were paused
        self._let_through: Reader | None = None  # reads on while the pool is full

    @property
    def full(self) -> bool:
        return self.limit > 0 and self.used >= self.limit

    def update(self, conn: Reader, holds: int) -> None:
        """``conn`` now holds ``holds`` bytes; pause it or wake others as that requires."""
        before = self._held.get(conn, 0)
        if holds == before:
            if holds >= SMALL and self.full:
                self._pause(conn)
            return
        self.used += holds - before
        if holds:
            self._held[conn] = holds
        else:
            self._held.pop(conn, None)
            if self._let_through is conn:
                self._let_through = None
        if holds > before:
            if holds >= SMALL and self.full:
                self._pause(conn)
        elif self._paused and not self.full:
            self._resume_all()

    def forget(self, conn: Reader) -> None:
        """``conn`` is closed: its memory comes back."""
        self._paused.pop(conn, None)
        self.update(conn, 0)
        if self._let_through is conn:
            self._let_through = None
        if self._paused and not self._someone_reads():
            self._resume_first()

    def _pause(self, conn: Reader) -> None:
        if conn in self._paused or conn is self._let_through:
            return
        self._paused[conn] = None
        self.pauses += 1
        conn.pause_reading()
        if not self._someone_reads():
            self._resume_first()

    def _someone_reads(self) -> bool:
        return any(c not in self._paused for c, n in self._held.items() if n >= SMALL)

    def _resume_first(self) -> None:
        conn = next(iter(self._paused))
        del self._paused[conn]
        self._let_through = conn
        conn.resume_reading()

    def _resume_all(self) -> None:
        waiting, self._paused = list(self._paused), {}
        for conn in waiting:
            conn.resume_reading()
