"""What the processes of a verify run share: the history, the client factory, the stop
signals and each group's progress (``Shared``), and the recording of a client's own
events (``record_events``)."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kaflite.verify.clients import (
    ClientFactory,
    ConsumerClient,
    ProducerClient,
    ShareConsumerClient,
)
from kaflite.verify.history import History, Note

if TYPE_CHECKING:
    from kaflite.verify.nemesis import Nemesis

__all__ = ["MAX_NOTES", "TP", "Shared", "record_events"]

TP = tuple[str, int]
MAX_NOTES = 20          # client errors noted per process (the rest are counted)


class Shared:
    def __init__(self, history: History, factory: ClientFactory, servers: str,
                 seed: int) -> None:
        self.history = history
        self.factory = factory
        self.servers = servers
        self.seed = seed
        self.writers_stop = threading.Event()
        self.transformers_stop = threading.Event()
        self.readers_stop = threading.Event()
        self.values: Iterator[int] = itertools.count()
        self.progress: dict[tuple[str, str, int], int] = defaultdict(lambda: -1)
        self._lock = threading.Lock()
        self.notes: dict[str, int] = defaultdict(int)
        self.nemesis: Nemesis | None = None   # the running one, stopped on any way out
        self.churn = False                      # consumers leave and rejoin (RunConfig)
        # under churn, the topic members add to their subscription and drop again
        self.idle_topic: str | None = None
        self._commit_rngs: dict[str, random.Random] = {}
        # threads tearing down crashed members' clients (_churn): joined at the run's end
        self.abandoned: list[threading.Thread] = []
        # share groups (_share_member): records the members know finished; the limit
        self.share_done: set[tuple[str, int, int]] = set()
        self.share_delivery_limit = 0

    def commits_async(self, process: str) -> bool:
        """Under churn, where the library has them, about half of a member's commits are
        asynchronous (seeded per member)."""
        if not (self.churn and self.factory.async_commits):
            return False
        with self._lock:
            rng = self._commit_rngs.setdefault(
                process, random.Random(f"{self.seed}-{process}-commits"))
            return rng.random() < 0.5

    def advance(self, group: str, tp: TP, offset: int) -> None:
        with self._lock:
            key = (group, tp[0], tp[1])
            if offset > self.progress[key]:
                self.progress[key] = offset

    def note(self, process: str, text: str) -> None:
        self.notes[process] += 1
        if self.notes[process] <= MAX_NOTES:
            self.history.add(Note(time=self.history.now(), process=process, text=text))


def record_events(shared: Shared, process: str,
                   client: ProducerClient | ConsumerClient | ShareConsumerClient,
                   limit: int = 2000) -> None:
    """The client's own events (kaflite's ``events()``) as notes, on the run's clock."""
    try:
        events = client.events()[-limit:]
    except Exception as exc:
        shared.note(process, f"events: {exc!r}")
        return
    h = shared.history
    offset = h.now() - time.time()      # wall clock -> seconds since the run started
    for ts, text in events:
        h.add(Note(time=ts + offset, process=process, text=f"event: {text}"))
