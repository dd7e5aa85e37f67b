"""What the nemesis acts on: kaflite's cluster process, or a real Apache Kafka.

``FaultTarget`` is the seam. ``ClusterProcess`` (``control.py``) implements every
fault through kaflite's HTTP control API. ``KafkaTarget`` runs Apache Kafka's own
broker (three KRaft nodes, each broker and controller, ``kaflite.testing.ApacheKafka``)
and injects what a real deployment suffers without help: a broker killed (SIGKILL) or
stopped (SIGTERM, Kafka's controlled shutdown) and started again, the whole cluster
killed at once and started again, and leadership moved (a reassignment that puts the
new leader first, then a preferred election, as ``kafka-leader-election`` does).

With ``via_proxy`` (``--via-proxy``) kaflite's proxy stands in front of the three
nodes (``kaflite.proxy.Proxy``, in this process), the workload's clients bootstrap
from it, and it injects the traffic faults the nemesis sends to kaflite's cluster,
from the very same rule bodies (``kaflite.cluster.rules.rule_from_body``): errors,
delays, throttles and dropped requests as rules of the proxy's ``RulesFilter``
(scoped to a broker: the traffic to that node only), and a drop of a broker's
connections as the proxy closing its client connections to that node. It is an
option, not the default: a bare run measures Kafka and the client alone, with no
second implementation in the path, and stays the reference.

Left out on Kafka, proxy or not (``LEFT_OUT`` says why): an isolation cuts a
broker off replication, which Kafka's brokers do among themselves on their own
listeners, not through the proxy; a coordinator move is no traffic fault either
(kaflite's cluster moves the leadership of the group's ``__consumer_offsets``
partition; on Kafka that is a reassignment and an election of an internal topic's
partition, not written yet). An injected UNKNOWN_MEMBER_ID is left out through the
proxy (``PROXY_EXCLUDED_ERRORS``).

Broker numbers in the plan are indices (0, 1, 2); each target maps them to its ids
(Kafka's nodes are 1, 2, 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kaflite.cluster.rules import rule_from_body
from kaflite.testing import ApacheKafka
from kaflite.testing._probe import move_leader_by_election, partition_states, run_blocking

if TYPE_CHECKING:
    from kaflite.proxy import Proxy

__all__ = ["KAFKA_KINDS", "LEFT_OUT", "PROXY_EXCLUDED_ERRORS", "PROXY_KINDS", "FaultTarget",
           "KafkaTarget", "Unsupported"]

#: the faults a bare Apache Kafka cluster can be given
KAFKA_KINDS = frozenset({"kill", "stop", "crash", "leader"})
#: the faults kaflite's proxy in front of it adds (``--via-proxy``)
PROXY_KINDS = frozenset({"errors", "delay", "throttle", "drop"})
#: why each other fault is left out on Kafka
LEFT_OUT = {
    "isolate": "an isolation cuts a broker off replication, which Kafka's brokers do among "
               "themselves on their own listeners, past any proxy",
    "coordinator": "a coordinator move is no traffic fault (it moves the leadership of an "
                   "internal topic's partition); not written for Kafka yet",
}
_BARE = ("a bare Kafka takes no such fault (it needs kaflite's broker hooks, or kaflite's "
         "proxy in front: --via-proxy)")
#: injected errors the proxy cannot give as a broker does
PROXY_EXCLUDED_ERRORS = {
    (api, "UNKNOWN_MEMBER_ID"): "through the proxy, Kafka's coordinator would not forget the "
    "member (kaflite's cluster does: Kafka answers it only for a member it dropped), and the "
    "old member would hold the group's rebalance for its session timeout"
    for api in ("Heartbeat", "OffsetCommit")}


class Unsupported(RuntimeError):
    """The target cannot inject that fault."""


class FaultTarget(Protocol):
    """A cluster the nemesis can hurt; ``kinds`` is None when it takes every fault."""

    name: str
    kinds: frozenset[str] | None
    left_out: Mapping[str, str]                          # kind -> why it is not taken
    excluded_errors: Mapping[tuple[str, str], str]       # (api, error) -> why not injected
    means: Mapping[str, str]                             # kind -> how it is injected

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
    """Apache Kafka, three nodes on loopback, as a ``FaultTarget``; with ``via_proxy``,
    behind kaflite's proxy, which injects the traffic faults."""

    name = "kafka"

    def __init__(self, libs: str | Path, config: dict[str, Any],
                 via_proxy: bool = False) -> None:
        self.kafka = ApacheKafka(libs, brokers=3, config=config)
        self.crashes = 0
        self.via_proxy = via_proxy
        self.proxy: Proxy | None = None
        self.kinds: frozenset[str] | None = KAFKA_KINDS | (PROXY_KINDS if via_proxy
                                                          else frozenset())
        self.left_out: Mapping[str, str] = {
            k: LEFT_OUT.get(k, _BARE) for k in (*LEFT_OUT, *PROXY_KINDS)
            if k not in self.kinds}
        self.excluded_errors: Mapping[tuple[str, str], str] = \
            PROXY_EXCLUDED_ERRORS if via_proxy else {}
        self.means: Mapping[str, str] = {
            "kill": "SIGKILL of a node's JVM", "stop": "SIGTERM (controlled shutdown)",
            "crash": "SIGKILL of every node", "leader": "reassignment and preferred election"
        } | ({k: "kaflite's proxy in front of Kafka" for k in PROXY_KINDS} if via_proxy
             else {})

    @property
    def bootstrap_servers(self) -> str:
        """Where the workload's clients bootstrap: the proxy, when there is one."""
        return self.kafka.bootstrap_servers if self.proxy is None \
            else self.proxy.bootstrap_servers

    @property
    def running(self) -> bool:
        return all(self.kafka.running(n) for n in self.kafka.node_ids)

    def start(self) -> KafkaTarget:
        self.kafka.start()
        if self.via_proxy:
            from kaflite.proxy import Proxy

            proxy = Proxy(self.kafka.bootstrap_servers)
            try:
                proxy.__enter__()
            except BaseException:
                self.kafka.stop()
                raise
            self.proxy = proxy
        return self

    def stop(self) -> None:
        proxy, self.proxy = self.proxy, None
        try:
            if proxy is not None:
                proxy.__exit__(None, None, None)
        finally:
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
        return run_blocking(partition_states(self.kafka.bootstrap_servers, topic), 30.0)

    def move_leader(self, topic: str, partition: int, to: int | None) -> int:
        return run_blocking(move_leader_by_election(self.kafka.bootstrap_servers, topic,
                                                    partition, to, timeout=20.0), 30.0)

    def heal(self) -> None:
        self.clear_rules()
        self.kafka.restart_all()

    def removals(self) -> list[dict[str, Any]]:
        return []       # Kafka's coordinators keep no such record

    def _unsupported(self, kind: str) -> Unsupported:
        return Unsupported(f"Apache Kafka cannot be given a fault {kind!r}: "
                           f"{self.left_out.get(kind, _BARE)}")

    def _faults(self, kind: str) -> Proxy:
        if self.proxy is None:
            raise self._unsupported(kind)
        return self.proxy

    # -- through the proxy ----------------------------------------------------------------
    def add_rule(self, kind: str, body: dict[str, Any]) -> int:
        """The nemesis's rule body, as kaflite's cluster takes it (broker: an index)."""
        proxy = self._faults({"error": "errors"}.get(kind, kind))
        body = dict(body)
        if body.get("broker") is not None:
            body["broker"] = self._node(int(body["broker"]))
        return proxy.faults.add(rule_from_body(kind, body)).id

    def drop_connections(self, broker: int) -> int:
        return self._faults("drop").drop_connections(self._node(broker))

    def remove_rule(self, rule_id: int) -> None:
        if self.proxy is not None:
            self.proxy.faults.remove(rule_id)

    def clear_rules(self) -> None:
        if self.proxy is not None:
            self.proxy.faults.clear()

    # -- never ------------------------------------------------------------------------------
    def isolate(self, broker: int, isolated: bool) -> None:
        raise self._unsupported("isolate")

    def move_coordinator(self, key: str, key_type: str, to: int | None) -> int:
        raise self._unsupported("coordinator")
