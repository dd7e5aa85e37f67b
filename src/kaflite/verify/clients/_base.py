"""What a workload needs from a client, whatever its library.

Each workload process is one thread that owns its clients: a ``Context`` per
thread (an event loop for the asyncio libraries, nothing for the blocking
ones), then producers and consumers made in that context and used only from
that thread. Delivery reports may arrive on a library's own thread; the
workload's callbacks are thread-safe.

Values are integers, sent as their decimal ASCII bytes; a record whose value
is not such a number comes back as -1 (and the checker calls it unexpected).
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

__all__ = ["CLASSIC", "SHARE_ACKS", "AckFn", "AckResult", "ClientFactory", "CommitDone",
           "ConsumerClient", "Context", "Delivery", "Listener", "ProducerClient", "Record",
           "ShareConsumerClient", "TxnFailure", "decode", "encode"]

# The classic protocol's flavours a run can ask for: partition.assignment.strategy
CLASSIC = {"classic": "range", "cooperative": "cooperative-sticky"}

T = TypeVar("T")
Record = tuple[str, int, int, int]          # topic, partition, offset, value
TP = tuple[str, int]
AckFn = Callable[[int | None, int | None, str | None], None]  # partition, offset, error
# an asynchronous commit's outcome: the offsets it reports on, and the error (None: ok)
CommitDone = Callable[[dict[TP, int], str | None], None]


def encode(value: int) -> bytes:
    return str(value).encode()


def decode(raw: bytes | None) -> int:
    try:
        return int(raw) if raw is not None else -1
    except ValueError:
        return -1


class TxnFailure(Exception):
    """A transactional call failed; ``kind`` says what may follow.

    ``abortable``: only abort is possible, and the transaction did not commit.
    ``retry``: the same call may be retried. ``fatal``: the producer is done (a new
    one must take over the transactional id); the outcome is unknown.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class Listener(Protocol):
    def assigned(self, tps: list[TP]) -> None: ...
    def revoked(self, tps: list[TP], lost: bool) -> None: ...


class Context:
    """Per-thread state: blocking libraries need none."""

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        raise TypeError("this context has no event loop")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self) -> None:
        pass


class LoopContext(Context):
    """An event loop that this thread alone drives (asyncio libraries)."""

    def __init__(self) -> None:
        from kaflite._loop import new_event_loop

        self.loop = new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if timeout is not None:
            return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))
        return self.loop.run_until_complete(coro)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Call a plain function inside the loop (for APIs that need a running loop)."""
        async def inside() -> T:
            return fn(*args)
        return self.loop.run_until_complete(inside())

    def sleep(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))

    def close(self) -> None:
        try:
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.wait(pending, timeout=5))
        finally:
            self.loop.close()


class ProducerClient(ABC):
    @abstractmethod
    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        """Queue one record (keyed: its value is its key, else no key); ``on_ack``
        reports where it went or why it failed."""

    def tick(self, seconds: float) -> None:
        """Let the client work (and report deliveries) for about ``seconds``."""
        time.sleep(seconds)

    @abstractmethod
    def flush(self, timeout: float) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def events(self) -> list[tuple[float, str]]:
        """The client's own control-plane events (wall-clock time, text), if it keeps any."""
        return []

    # -- transactions (only where the factory says ``transactions``) ----------------------
    def init_transactions(self) -> None:
        raise NotImplementedError

    def begin(self) -> None:
        raise NotImplementedError

    def send_offsets(self, offsets: dict[TP, int], consumer: ConsumerClient) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError


class ConsumerClient(ABC):
    @abstractmethod
    def subscribe(self, topics: list[str]) -> None: ...

    @abstractmethod
    def assign(self, tps: list[TP]) -> None:
        """Read exactly these partitions from offset 0, outside any group."""

    @abstractmethod
    def poll(self, timeout: float) -> list[Record]: ...

    @abstractmethod
    def commit(self, offsets: dict[TP, int]) -> None:
        """Commit these next-offsets synchronously; raise if the group refused them."""

    def commit_async(self, offsets: dict[TP, int], on_done: CommitDone) -> None:
        """Commit without waiting (only where the factory says ``async_commits``); the
        library reports each partition's outcome, when it does, to ``on_done``."""
        raise NotImplementedError

    @abstractmethod
    def seek(self, tp: TP, offset: int) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    # Whether ``abandon`` may block for long, so that a crashed member's client is torn
    # down on a thread of its own. Only for a client that owns no state of the member's
    # thread: an asyncio client's loop is driven by that thread alone (``LoopContext``),
    # and a second thread running it fails ("this event loop is already running").
    abandon_on_a_thread = False

    def abandon(self) -> None:
        """Drop the client as a killed process would: where the library can, with no
        LeaveGroup and no rebalance callbacks; else as ``close``."""
        self.close()

    def events(self) -> list[tuple[float, str]]:
        """The client's own control-plane events (wall-clock time, text), if it keeps any."""
        return []


# A record delivered to a share consumer: topic, partition, offset, value, its delivery
# count, and when its acquisition lock ends at the earliest (time.monotonic(); None if the
# library does not say)
Delivery = tuple[str, int, int, int, int, float | None]
# a leader's answer to acknowledgements: partition, the offsets it answers for, error
AckResult = Callable[[TP, set[int], str | None], None]
SHARE_ACKS = ("accept", "release", "reject")


class ShareConsumerClient(ABC):
    """A member of a share group (KIP-932), acknowledging each record explicitly."""

    abandon_on_a_thread = False     # as ConsumerClient's

    @abstractmethod
    def subscribe(self, topics: list[str]) -> None: ...

    @abstractmethod
    def poll(self, timeout: float) -> list[Delivery]: ...

    @abstractmethod
    def acknowledge(self, tp: TP, offset: int, type_: str) -> None:
        """Acknowledge a record of the last poll (``SHARE_ACKS``); sent by ``commit``."""

    @abstractmethod
    def commit(self, asynchronous: bool) -> None:
        """Send the acknowledgements (and, unless ``asynchronous``, wait for the answers);
        each leader's answer goes to the factory's ``on_result``."""

    @abstractmethod
    def close(self) -> None: ...

    def abandon(self) -> None:
        self.close()

    def events(self) -> list[tuple[float, str]]:
        return []

    def unseen(self) -> list[tuple[float, str, int, tuple[int, ...], str]]:
        """Records the library was delivered and never handed out (given back with a
        partition taken away or at close, or expired in its buffer), as far as it says:
        (wall-clock time, topic, partition, offsets, why)."""
        return []


class ClientFactory(ABC):
    name: str
    transactions = False
    # Faults left out of a workload's nemesis because the library fails under them by
    # itself (a known upstream bug): workload -> {fault kind: why, with the issue}.
    known_issues: dict[str, dict[str, str]] = {}
    # Injected errors left out of the ``errors`` fault for the same reason:
    # workload -> {(api, error): why}. The rest of ERROR_MENU still runs.
    known_errors: dict[str, dict[tuple[str, str], str]] = {}
    # How many readers a group may have (None: as many as the run asks for). A client
    # without consumer groups reads every partition in each reader: it runs one.
    readers_per_group: int | None = None
    # The group protocols its consumers speak, and the one a run chose (``RunConfig``).
    # "share": a share group (KIP-932) of ``share_consumer``s
    group_protocols: tuple[str, ...] = ("classic",)     # and "cooperative", "consumer", "share"
    group_protocol = "classic"
    # The consumers' max.poll.interval.ms, when a run sets one (group churn stalls
    # members past it), and whether the library has such a limit at all.
    max_poll_interval_ms: int | None = None
    stalls = True
    resubscribes = True     # whether a consumer may subscribe again to other topics
    async_commits = False   # whether its consumers have ``commit_async``

    def unavailable(self) -> str | None:
        """Why the library cannot run here (not installed, say), or None."""
        return None

    def start(self) -> None:
        """Called once before the run's cluster starts (a slow client warms up here)."""
        return None

    def close(self) -> None:
        """Called once when the run ends, whatever happened."""
        return None

    def context(self) -> Context:
        return Context()

    @abstractmethod
    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient: ...

    @abstractmethod
    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient: ...

    def share_consumer(self, ctx: Context, servers: str, client_id: str, group: str,
                       on_result: AckResult) -> ShareConsumerClient:
        """A share group member (only where ``group_protocols`` has ``share``)."""
        raise NotImplementedError(f"{self.name} has no share consumer")
