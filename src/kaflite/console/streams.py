"""Live updates: a hub that fans events out to Server-Sent-Event subscribers.

Each subscriber has a bounded queue: when it is full the oldest event goes and
the subscriber's next event says how many were dropped, so a slow browser never
pins memory or slows the cluster. ``publish`` never blocks and never awaits.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Iterable

__all__ = ["Hub", "Subscriber"]

KINDS = frozenset({"cluster", "log", "metrics"})
KEEPALIVE_S = 15.0


class Subscriber:
    def __init__(self, kinds: frozenset[str], maxlen: int) -> None:
        self.kinds = kinds
        self.queue: deque[tuple[str, dict[str, object]]] = deque()
        self.maxlen = maxlen
        self.dropped = 0
        self.ready = asyncio.Event()
        self.closed = False

    def offer(self, kind: str, data: dict[str, object]) -> None:
        if kind not in self.kinds:
            return
        if len(self.queue) >= self.maxlen:
            self.queue.popleft()
            self.dropped += 1
        self.queue.append((kind, data))
        self.ready.set()

    def close(self) -> None:
        self.closed = True
        self.ready.set()


class Hub:
    def __init__(self, maxlen: int = 1000) -> None:
        self.maxlen = maxlen
        self.subscribers: set[Subscriber] = set()
        self.closed = False

    def publish(self, kind: str, data: dict[str, object]) -> None:
        for sub in list(self.subscribers):
            sub.offer(kind, data)

    def subscribe(self, kinds: Iterable[str]) -> Subscriber:
        sub = Subscriber(frozenset(kinds) & KINDS or KINDS, self.maxlen)
        if self.closed:
            sub.close()
        self.subscribers.add(sub)
        return sub

    def close(self) -> None:
        self.closed = True
        for sub in list(self.subscribers):
            sub.close()

    async def sse(self, sub: Subscriber, hello: dict[str, object]) -> AsyncIterator[bytes]:
        """The subscriber's events as SSE bytes, until the hub closes or the client goes."""
        try:
            yield _frame("hello", hello)
            while not sub.closed:
                if not sub.queue:
                    sub.ready.clear()
                    try:
                        await asyncio.wait_for(sub.ready.wait(), KEEPALIVE_S)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                while sub.queue:
                    kind, data = sub.queue.popleft()
                    if sub.dropped:
                        data = {**data, "dropped": sub.dropped}
                        sub.dropped = 0
                    yield _frame(kind, data)
        finally:
            self.subscribers.discard(sub)


def _frame(kind: str, data: dict[str, object]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n".encode()
