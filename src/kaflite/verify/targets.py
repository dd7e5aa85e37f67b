"""What the nemesis acts on: kaflite's cluster process, or a real Apache Kafka.

``FaultTarget`` is the seam. ``ClusterProcess`` (``control.py``) implements every
fault through kaflite's HTTP control API. ``KafkaTarget`` runs Apache Kafka's own
broker (three KRaft nodes, each broker and controller, ``kaflite.testing.ApacheKafka``)
and injects what a real deployment suffers without help: a broker killed (SIGKILL) or
stopped (SIGTERM, Kafka's controlled shutdown) and started again, the whole cluster
killed at once and started again, and leadership moved (a reassignment that puts the
new leader first, then a preferred election, as ``kafka-leader-election`` does). The
other faults (injected errors, delays, throttles, dropped connections, isolation,
coordinator moves) need kaflite's broker hooks; on Kafka they are left out of the plan
and the run says so.

Broker numbers in the plan are indices (0, 1, 2); each target maps them to its ids
(Kafka's nodes are 1, 2, 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from kaflite.testing import ApacheKafka
from kaflite.testing._probe import move_leader_by_election, partition_states, run_blocking

__all__ = ["KAFKA_KINDS", "FaultTarget", "KafkaTarget", "Unsupported"]

#: the faults a bare Apache Kafka cluster can be given
KAFKA_KINDS = frozenset({"kill", "stop", "crash", "leader"})


class Unsupported(RuntimeError):
    """The target cannot inject that fault."""


class FaultTarget(Protocol):
    """A cluster the nemesis can hurt; ``kinds`` is None when it takes every fault."""

    name: str
    kinds: frozenset[str] | None

    @property
    def bootstrap_servers(self) -> str: ...
    @property
    def running(self) -> bool: ...
    def start(self) -> Any: ...
    def stop(self) -> None: ...
    def broker_down(self, broker: int, how: str) -> None: ...
    def broker_up(self, broker: int) -> None: ...
    def isolate(self, broker: int, isolated: bool) -> None: ...
    def crash(self) -> None: ...
    def restart(self) -> None: ...
    def partitions(self, topic: str) -> list[dict[str, Any]]: ...
    def move_leader(self, topic: str, partition: int, to: int | None) -> int: ...
    def move_coordinator(self, key: str, key_type: str, to: int | None) -> int: ...
    def add_rule(self, kind: str, body: dict[str, Any]) -> int: ...
    def drop_connections(self, broker: int) -> int: ...
    def remove_rule(self, rule_id: int) -> None: ...
    def clear_rules(self) -> None: ...
    def heal(self) -> None: ...
    def removals(self) -> list[dict[str, Any]]: ...


class KafkaTarget:
    """Apache Kafka, three nodes on loopback, as a ``FaultTarget``."""

    name = "kafka"
    kinds: frozenset[str] | None = KAFKA_KINDS

    def __init__(self, libs: str | Path, config: dict[str, Any]) -> None:
        self.kafka = ApacheKafka(libs, brokers=3, config=config)
        self.crashes = 0

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka.bootstrap_servers

    @property
    def running(self) -> bool:
        return all(self.kafka.running(n) for n in self.kafka.node_ids)

    def start(self) -> KafkaTarget:
        self.kafka.start()
        return self

    def stop(self) -> None:
        self.kafka.stop()

    def _node(self, broker: int) -> int:
        return self.kafka.node_ids[broker]

    def broker_down(self, broker: int, how: str) -> None:
        if how == "kill":
            self.kafka.kill(self._node(broker))
        else:
            self.kafka.shutdown(self._node(broker))

    def broker_up(self, broker: int) -> None:
        self.kafka.restart(self._node(broker))

    def crash(self) -> None:
        self.kafka.kill_all()
        self.crashes += 1

    def restart(self) -> None:
        self.kafka.restart_all()

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        return run_blocking(partition_states(self.bootstrap_servers, topic), 30.0)

    def move_leader(self, topic: str, partition: int, to: int | None) -> int:
        return run_blocking(move_leader_by_election(self.bootstrap_servers, topic, partition,
                                                    to, timeout=20.0), 30.0)

    def heal(self) -> None:
        self.kafka.restart_all()

    def removals(self) -> list[dict[str, Any]]:
        return []       # Kafka's coordinators keep no such record

    def clear_rules(self) -> None:
        return None     # no rules were ever added

    def remove_rule(self, rule_id: int) -> None:
        return None

    def _unsupported(self, what: str) -> Unsupported:
        return Unsupported(f"Apache Kafka cannot be given {what} (it needs kaflite's hooks)")

    def isolate(self, broker: int, isolated: bool) -> None:
        raise self._unsupported("an isolation")

    def move_coordinator(self, key: str, key_type: str, to: int | None) -> int:
        raise self._unsupported("a coordinator move")

    def add_rule(self, kind: str, body: dict[str, Any]) -> int:
        raise self._unsupported(f"a {kind} rule")

    def drop_connections(self, broker: int) -> int:
        raise self._unsupported("dropped connections")
