"""kaflite's own cluster as a ``ClusterUnderTest``: its brokers in this process, or each
in a process of its own (``processes=True``, ``kaflite up --processes``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from kaflite.cluster.cluster import Cluster
from kaflite.testing._target import ClusterUnderTest

__all__ = ["KafliteCluster"]


class KafliteCluster(ClusterUnderTest):
    """``kaflite.cluster.Cluster`` on its own background loop (its sync mode).

    ``config`` takes Kafka's broker property names, as ``Cluster`` does. With
    ``processes``, ``kill`` is a SIGKILL of that broker's process, as for Apache Kafka;
    in one process it drops the broker's connections and state without a clean stop.
    ``listeners`` adds listeners besides PLAINTEXT, each named for its security
    protocol (``SASL_PLAINTEXT``...), as ``ApacheKafka``'s do. ``advertised_ports``
    (one a broker, in node id order) are the ports the brokers advertise on PLAINTEXT
    instead of those they bind: where something in front of them (a TCP proxy) forwards
    to the bound ones, ``listening_ports`` says which those are.
    """

    def __init__(self, brokers: int = 1, config: Mapping[str, object] | None = None,
                 processes: bool = False, listeners: Sequence[str] = (),
                 advertised_ports: Sequence[int] | None = None) -> None:
        self.name = f"kaflite-{brokers}{'p' if processes else ''}"
        self._brokers = brokers
        self._config = dict(config or {})
        self._processes = processes
        # more listeners besides PLAINTEXT, each named for its security protocol
        self._listeners = ",".join(f"{name}://127.0.0.1:0" for name in ("PLAINTEXT", *listeners))
        self._advertised_ports = list(advertised_ports) if advertised_ports else None
        self._cluster: Cluster | None = None

    @property
    def cluster(self) -> Cluster:
        """The wrapped cluster, for kaflite-only checks (its registry, its faults)."""
        if self._cluster is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._cluster

    @property
    def node_ids(self) -> list[int]:
        cluster = self.cluster
        return sorted(cluster.processes if cluster.use_processes else cluster.brokers)

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def bootstrap(self, listener: str) -> str:
        return self.cluster.bootstrap(listener)

    @property
    def listening_ports(self) -> dict[int, int]:
        """Each broker's bound PLAINTEXT port, by node id (what it advertises may differ:
        ``advertised_ports``)."""
        cluster = self.cluster
        handles = cluster.processes if cluster.use_processes else cluster.brokers
        return {n: handles[n].bound["PLAINTEXT"] for n in self.node_ids}

    def start(self) -> None:
        cluster = Cluster(brokers=self._brokers, config=self._config,
                          processes=self._processes, listeners=self._listeners,
                          advertised_host="127.0.0.1" if self._advertised_ports else None,
                          advertised_ports=self._advertised_ports)
        cluster.__enter__()
        self._cluster = cluster

    def stop(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.__exit__(None, None, None)

    def kill(self, node_id: int) -> None:
        self.cluster.call(self.cluster.kill_broker(node_id))

    def restart(self, node_id: int) -> None:
        self.cluster.call(self.cluster.restart_broker(node_id))

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        return self.cluster.move_leader(topic, partition, to)

    def pids(self) -> list[int]:
        """This process (the brokers' loop, or with ``processes`` the controller), then
        each running broker process."""
        cluster = self.cluster
        brokers = [pid for n in self.node_ids
                   if (pid := cluster.broker_pid(n)) is not None and cluster.broker_running(n)]
        return [os.getpid(), *brokers]
