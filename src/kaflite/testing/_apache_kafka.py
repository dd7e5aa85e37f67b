"""Apache Kafka (KRaft, each node a combined broker and controller) as a ``ClusterUnderTest``.

The jars come from ``tools/ensure_kafka.sh`` (Maven Central; there is no tarball here):
pass its ``libs/`` directory. The version is read from the ``kafka_2.13-*.jar`` in it,
so the script's pin is the only place it is written.

Start: choose two free loopback ports per node (client and controller), write each
node's ``server.properties`` with one static voter set (``controller.quorum.voters``)
and one cluster id, format every log dir (``kafka.tools.StorageTool``), launch the
JVMs together, then probe each node until a Metadata request *to that node* lists
every broker. That last condition is stricter than "the port is open" or "the log
says started": a KRaft broker is listed only once the controller has unfenced it.

The internal topics get 1-3 partitions (Kafka's default of 50 costs seconds per
group or transaction coordinator load on 2 cores) and a replication factor that the
cluster can meet. The group heartbeat intervals are short so that rebalances in the
tests settle in about a second instead of five.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kaflite.testing._kafka_node import JVM_OPTS, KafkaNode, format_nodes
from kaflite.testing._probe import brokers_seen, move_leader_by_election, run_blocking
from kaflite.testing._target import ClusterUnderTest, TargetUnavailable

__all__ = ["ApacheKafka", "kafka_version"]

START_TIMEOUT_S = 120.0
PROBE_INTERVAL_S = 0.25


def kafka_version(libs: Path) -> str:
    """The release in ``libs``: the version of its ``kafka_2.13-<version>.jar``."""
    for jar in libs.glob("kafka_2.13-*.jar"):
        rest = jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
        if rest and rest[0].isdigit() and "-" not in rest:    # not -test or -sources
            return rest
    raise TargetUnavailable(f"{libs} holds no kafka_2.13 jar: run tools/ensure_kafka.sh")


def new_cluster_id() -> str:
    """16 random bytes in URL-safe base64 without padding: the form ``Uuid.fromString``
    reads (plain base64 may contain '+' or '/', which it rejects)."""
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (all held open together while chosen)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def base_properties(nodes: int) -> dict[str, str]:
    """What every node of an ``nodes``-node cluster shares, besides its own ids and ports."""
    rf = str(min(3, nodes))
    min_isr = str(min(2, nodes))
    internal_partitions = str(min(3, nodes))
    return {
        "process.roles": "broker,controller",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": internal_partitions,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": internal_partitions,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": min_isr,
        "share.coordinator.state.topic.num.partitions": internal_partitions,
        "num.io.threads": "2",
        "num.network.threads": "2",
        "num.replica.fetchers": "1",
        "log.cleaner.dedupe.buffer.size": "2097152",
        "group.initial.rebalance.delay.ms": "0",
        # KIP-848 groups: the coordinator's heartbeat interval paces every reconciliation
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "1000",
        # a SIGKILLed node is fenced (and its partitions led elsewhere) after this long
        "broker.heartbeat.interval.ms": "1000",
        "broker.session.timeout.ms": "6000",
    }


class ApacheKafka(ClusterUnderTest):
    """``brokers`` KRaft nodes, ids 1..n, each broker+controller, all of them voters.

    ``advertised_ports`` (one a node, in node id order) are the ports the nodes advertise
    on PLAINTEXT instead of those they bind, as ``KafliteCluster``'s: where a TCP proxy
    in front of them forwards to the bound ones (``listening_ports``). The brokers then
    replicate over a listener of their own (``INTERNAL``, bound and advertised on
    loopback), not through the proxy, as a docker compose environment keeps its
    inter-broker listener off the proxied one.
    """

    def __init__(self, libs: str | Path, brokers: int = 1,
                 config: Mapping[str, object] | None = None,
                 start_timeout: float = START_TIMEOUT_S, listeners: Sequence[str] = (),
                 jvm_opts: Sequence[str] = JVM_OPTS,
                 advertised_ports: Sequence[int] | None = None) -> None:
        self.libs = Path(libs)
        self.version = kafka_version(self.libs)
        self.name = f"kafka-{self.version}-{brokers}"
        self._count = brokers
        self._config = {k: str(v) for k, v in (config or {}).items()}
        self.start_timeout = start_timeout
        # more client listeners besides PLAINTEXT, each named for its security protocol
        self.listeners = list(listeners)
        #: every node's JVM flags (``JVM_OPTS``, sized for tests, unless given)
        self.jvm_opts = tuple(jvm_opts)
        if advertised_ports is not None and len(advertised_ports) != brokers:
            raise ValueError(f"{len(advertised_ports)} advertised ports for {brokers} nodes")
        self._advertised_ports = list(advertised_ports) if advertised_ports else None
        self.nodes: dict[int, KafkaNode] = {}
        self.cluster_id = new_cluster_id()
        self._dir: Path | None = None
        #: seconds from launching the JVMs to every node listing every broker
        self.last_start_s: float | None = None

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.nodes) or list(range(1, self._count + 1))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.nodes[n].address for n in self.node_ids)

    def bootstrap(self, listener: str) -> str:
        return ",".join(f"127.0.0.1:{self.nodes[n].ports[listener]}" for n in self.node_ids)

    @property
    def listening_ports(self) -> dict[int, int]:
        """Each node's bound PLAINTEXT port, by node id (what it advertises may differ:
        ``advertised_ports``)."""
        return {n: self.nodes[n].broker_port for n in self.node_ids}

    def _plan(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix=f"kaflite-{self.name}-"))
        internal = ["INTERNAL"] if self._advertised_ports else []
        names = ["PLAINTEXT", "CONTROLLER", *internal, *self.listeners]
        ports = iter(_free_ports(len(names) * self._count))
        ids = list(range(1, self._count + 1))
        plan = {node_id: {name: next(ports) for name in names} for node_id in ids}
        advertised = dict(zip(ids, self._advertised_ports or [], strict=False))
        voters = ",".join(f"{n}@127.0.0.1:{plan[n]['CONTROLLER']}" for n in ids)
        protocols = ",".join(
            f"{n}:{'PLAINTEXT' if n in ('CONTROLLER', 'INTERNAL') else n}" for n in names)
        for node_id, node_ports in plan.items():
            directory = self._dir / f"node-{node_id}"
            listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in node_ports.items())
            shown = {**node_ports, "PLAINTEXT": advertised.get(node_id, node_ports["PLAINTEXT"])}
            props = {**base_properties(self._count),
                     "node.id": str(node_id),
                     "controller.quorum.voters": voters,
                     "listeners": listeners,
                     "advertised.listeners": ",".join(
                         f"{n}://127.0.0.1:{p}" for n, p in shown.items()),
                     "listener.security.protocol.map": protocols,
                     "log.dirs": str(directory / "data"),
                     **({"inter.broker.listener.name": "INTERNAL"} if internal else {}),
                     **self._config}
            self.nodes[node_id] = KafkaNode(node_id, node_ports["PLAINTEXT"],
                                            node_ports["CONTROLLER"], directory, self.libs,
                                            props, ports=node_ports,
                                            jvm_opts=self.jvm_opts)

    def start(self) -> None:
        if self.nodes:
            raise RuntimeError(f"{self.name} is already started")
        self._plan()
        nodes = list(self.nodes.values())
        for node in nodes:
            node.write_properties()
        format_nodes(nodes, self.cluster_id)
        began = time.monotonic()
        for node in nodes:
            node.start()
        self._wait_listed(self.node_ids)
        self.last_start_s = time.monotonic() - began

    def _wait_listed(self, ask: list[int]) -> None:
        """Until a Metadata request to each node in ``ask`` lists every broker; fails
        at once with the node's logs if one of the JVMs exits meanwhile."""
        want = set(self.node_ids)
        deadline = time.monotonic() + self.start_timeout
        pending = list(ask)
        seen: dict[int, set[int] | None] = {}
        while pending:
            for node_id in list(pending):
                node = self.nodes[node_id]
                if not node.running:
                    raise RuntimeError(node.exited_why())
                seen[node_id] = run_blocking(brokers_seen(node.address), 10.0)
                if seen[node_id] == want:
                    pending.remove(node_id)
            if not pending:
                return
            if time.monotonic() > deadline:
                logs = "\n".join(self.nodes[n].exited_why() for n in pending)
                raise TimeoutError(f"{self.name}: after {self.start_timeout:g} s nodes "
                                   f"{pending} list {seen}, not {sorted(want)}\n{logs}")
            time.sleep(PROBE_INTERVAL_S)

    def stop(self) -> None:
        """SIGTERM every node at once (Kafka's clean shutdown), SIGKILL what is left after
        the grace period, and delete the data. Set ``KAFLITE_KEEP_KAFKA=1`` to keep the
        directories (logs included) for a post-mortem."""
        nodes = list(self.nodes.values())
        for node in nodes:
            node.terminate()
        for node in nodes:
            node.wait_or_kill()
        self.nodes = {}
        directory, self._dir = self._dir, None
        if directory is not None and not os.environ.get("KAFLITE_KEEP_KAFKA"):
            shutil.rmtree(directory, ignore_errors=True)

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill()

    def shutdown(self, node_id: int) -> None:
        """Stop node ``node_id`` cleanly (SIGTERM: Kafka's controlled shutdown hands its
        leaderships over first); SIGKILL after the grace period."""
        node = self.nodes[node_id]
        node.terminate()
        node.wait_or_kill()

    def running(self, node_id: int) -> bool:
        return node_id in self.nodes and self.nodes[node_id].running

    def kill_all(self) -> None:
        """SIGKILL every node at once: a power cut of the whole cluster, data kept."""
        for node in self.nodes.values():
            node.kill()

    def restart_all(self) -> None:
        """Start every node that is down, and return once each lists every broker."""
        down = [n for n, node in self.nodes.items() if not node.running]
        for node_id in down:
            self.nodes[node_id].start()
        self._wait_listed(self.node_ids)

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.kill()
        node.start()
        self._wait_listed([node_id])

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        return run_blocking(move_leader_by_election(self.bootstrap_servers, topic, partition,
                                                    to, timeout=30.0), 40.0)

    def pids(self) -> list[int]:
        """Each running node's JVM (broker and controller in one process)."""
        return [pid for n in self.node_ids if n in self.nodes
                and (pid := self.nodes[n].pid) is not None]

    def log_tails(self) -> str:
        """The end of every node's logs (for a failing test's report)."""
        return "\n".join(node.exited_why() for node in self.nodes.values())
