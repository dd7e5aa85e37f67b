"""``ClusterUnderTest``: the one interface over every broker kaflite is tested against.

The interop tests and the benchmarks are written once, against this class, and run
against kaflite's own cluster, Apache Kafka, Tansu and franz-go's kfake. What
a target cannot do it says by raising ``Unsupported``, so a test can skip that case
with the reason rather than pretend.

The interface is blocking on purpose: a target starts and stops from a pytest fixture
or a benchmark's main, outside any event loop; the clients under test then run on
loops of their own.
"""

from __future__ import annotations

import abc
from types import TracebackType
from typing import Self

__all__ = ["ClusterUnderTest", "TargetUnavailable", "Unsupported"]


class Unsupported(NotImplementedError):
    """This target cannot do that (for example move a leader on demand)."""


class TargetUnavailable(RuntimeError):
    """The target cannot run on this machine (a tool is missing, a fetch failed)."""


class ClusterUnderTest(abc.ABC):
    """A running cluster of brokers that clients can be pointed at.

    ``node_ids`` are the broker ids, in order; ``bootstrap_servers`` lists every
    broker's client listener (``host:port,...``). ``kill`` crashes one broker (no
    clean shutdown, as a power cut or SIGKILL would); ``restart`` brings it back with
    the same id, ports and data, and returns once the cluster lists it again.
    """

    #: a short label for test ids and reports, e.g. ``kaflite-3`` or ``kafka-4.4.0-1``
    name: str

    #: whether a broker brought back by ``restart`` still has its data; False where the
    #: target keeps it only in memory (Tansu here), so that a test relying on it can
    #: skip with the reason instead of failing
    restart_keeps_data: bool = True

    @property
    @abc.abstractmethod
    def node_ids(self) -> list[int]: ...

    @property
    @abc.abstractmethod
    def bootstrap_servers(self) -> str: ...

    def bootstrap(self, listener: str) -> str:
        """The bootstrap servers of one listener (``PLAINTEXT`` is ``bootstrap_servers``);
        targets started with more listeners override this."""
        if listener == "PLAINTEXT":
            return self.bootstrap_servers
        raise Unsupported(f"{self.name} has no {listener} listener")

    @abc.abstractmethod
    def start(self) -> None:
        """Start every broker and return once a client sees all of them."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop every broker and delete the data; safe to call twice or after a failed
        start."""

    @abc.abstractmethod
    def kill(self, node_id: int) -> None:
        """Crash broker ``node_id`` and return once it is gone."""

    @abc.abstractmethod
    def restart(self, node_id: int) -> None:
        """Start broker ``node_id`` again after ``kill``; return once the cluster lists
        it again."""

    def unkillable(self) -> dict[int, str]:
        """The brokers that ``kill`` would refuse (``Unsupported``), each with the reason;
        a test that needs to kill a partition's leader moves it off them first."""
        return {}

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        """Make ``to`` (or any other in-sync replica) the partition's leader; returns the
        new leader. Targets that cannot raise ``Unsupported``."""
        raise Unsupported(f"{self.name} cannot move a partition's leader")

    def pids(self) -> list[int]:
        """The OS processes the running brokers (and controllers) live in, for reading
        their CPU time from ``/proc``; their child processes are not listed. Targets that
        run in the caller's process list it, which then also holds the caller's own work.
        Targets that cannot say raise ``Unsupported``."""
        raise Unsupported(f"{self.name} cannot name its processes")

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
