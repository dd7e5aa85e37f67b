"""One verify run: cluster, workload, nemesis, heal, drain, catch-up, check.

Theory of operation
-------------------
1. Start the cluster process (3 brokers, loopback, a temporary data directory)
   and create the topics: replication factor 3, min.insync.replicas=2.
2. Start the readers, then the writers, then the nemesis; let them run for
   ``seconds``.
3. Stop the nemesis: it heals everything (``Phase healed``). Stop the writers;
   each flushes what it has queued (``Phase writers-done``).
4. Drain each written topic with kaflite's async consumer (``assign()``, offset 0
   to the end) at read_uncommitted, and at read_committed for transactional
   topics: the ground truth of the log (``Drain``).
5. Let the readers catch up to the drained log end, for at most
   ``progress_bound`` seconds (a group that does not is *stuck*), then stop them.
   In the txn workload the transformers catch up on the input first; their
   output is then drained and the readers catch up on it.
6. Stop the cluster and check the history (``kaflite.verify.checker.check``).

Every wait is bounded; a process that does not stop in time is noted and left
behind (its thread is a daemon), and what it did not see through shows in the
check.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kaflite.cluster.request_log_writer import ENABLE as REQUEST_LOG_ENABLE
from kaflite.verify._churn import IDLE_PARTITIONS, IDLE_TOPIC, MAX_POLL_INTERVAL_MS
from kaflite.verify._probe import ApiVersionsProbe
from kaflite.verify._share_member import share_consumer_process
from kaflite.verify._threads import start_daemon
from kaflite.verify.checker import CheckResult, check
from kaflite.verify.clients import factory
from kaflite.verify.control import ClusterProcess
from kaflite.verify.history import Drain, History, Meta, Note, Phase, Probe, Removed
from kaflite.verify.nemesis import KINDS, Nemesis, Targets, plan
from kaflite.verify.report import exclusions
from kaflite.verify.workload import (
    Shared,
    consumer_process,
    producer_process,
    transformer_process,
    txn_producer_process,
)

if TYPE_CHECKING:
    from kaflite.verify.targets import FaultTarget

__all__ = ["CLUSTER_CONFIG", "SHARE_GROUP_CONFIGS", "ClientUnavailable", "RunConfig", "fill_partitions", "run"]

WORKLOADS = ("queue", "txn")
CLUSTER_CONFIG = {
    "replica.lag.time.max.ms": 3000,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 6,
    "transaction.state.log.num.partitions": 6,
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    # KIP-848 members (--group-protocol consumer) get what the classic ones ask for
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    # share groups (--group-protocol share) take their settings from group configs
    # (SHARE_GROUP_CONFIGS), within these bounds
    "group.share.min.session.timeout.ms": 1000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.min.record.lock.duration.ms": 1000,
}
# The share group's configs (IncrementalAlterConfigs on the group, before any member
# joins): sessions as the other protocols' members get them, records from the log's
# start, acquisition locks shorter than a churning member's stall or cut
# (_churn.STALL_S, CUT_S), and few deliveries before a record is archived.
SHARE_GROUP_CONFIGS = {
    "share.auto.offset.reset": "earliest",
    "share.session.timeout.ms": "6000",
    "share.heartbeat.interval.ms": "500",
    "share.record.lock.duration.ms": "4000",
    "share.delivery.count.limit": "3",
}


@dataclass
class RunConfig:
    client: str = "kaflite"
    workload: str = "queue"
    nemesis: tuple[str, ...] = KINDS
    seconds: float = 30.0
    seed: int = field(default_factory=lambda: random.randrange(1 << 31))
    partitions: int = 4
    producers: int = 2
    consumers: int = 2
    rate: float = 150.0                 # values per second per producer
    progress_bound: float = 30.0
    data_dir: Path | None = None        # default: a temporary directory, removed after
    history: Path | None = None         # where to write the history (JSON lines)
    processes: bool = False             # each broker in its own process: kill = SIGKILL
    # the groups' members: classic (eager: range), cooperative (classic with KIP-429's
    # cooperative-sticky), consumer (KIP-848) or share (a share group, KIP-932)
    group_protocol: str = "classic"
    churn: bool = False                 # members leave and join again at seeded moments
    filler_partitions: int = 0          # more partitions (RF 3, idle) in the cluster first
    # the cluster under test: "kaflite", or "kafka" (Apache Kafka's broker, three nodes,
    # from the jars in kafka_libs: what tools/ensure_kafka.sh prints)
    target: str = "kaflite"
    kafka_libs: Path | None = None
    # kaflite's proxy in front of Kafka injects the traffic faults (errors, delay,
    # throttle, drop) as it does for kaflite's cluster (targets.KafkaTarget)
    via_proxy: bool = False
    # kaflite's cluster keeps every request in its request log (``__kaflite_requests``,
    # ``kaflite requests``): the wire of an invalid round, read from its kept data
    request_log: bool = False

    def meta(self) -> dict[str, Any]:
        out = asdict(self)
        out["nemesis"] = ("all" if set(self.nemesis) == set(KINDS) else
                          ",".join(self.nemesis) if self.nemesis else "none")
        out["data_dir"] = str(self.data_dir) if self.data_dir else None
        out["history"] = str(self.history) if self.history else None
        out["kafka_libs"] = str(self.kafka_libs) if self.kafka_libs else None
        if self.workload == "txn":
            out["transforms"] = [["vin", "vout"]]
        if self.group_protocol == "share":
            out["share_group_configs"] = dict(SHARE_GROUP_CONFIGS)
        return out


class ClientUnavailable(RuntimeError):
    """The run's client library cannot run on this machine (not installed)."""


# how long the run waits, at its end, for crashed members' clients to finish tearing down
ABANDONED_JOIN_S = 10.0


def _join(history: History, threads: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            history.add(Note(time=history.now(), process="run",
                             text=f"{t.name} did not stop within {timeout:.0f} s"))


def run(config: RunConfig, on_phase: Callable[[str], None] | None = None
        ) -> tuple[History, CheckResult]:
    """Run ``config`` and check it: the history and the result."""
    if config.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {config.workload!r}; known: {', '.join(WORKLOADS)}")
    client = factory(config.client)
    why = client.unavailable()
    if why is not None:
        raise ClientUnavailable(f"{config.client} cannot run here: {why}")
    if config.workload == "txn" and not client.transactions:
        raise ValueError(f"the txn workload does not run with {config.client}")
    if config.group_protocol == "share" and config.workload != "queue":
        raise ValueError("share groups run in the queue workload only")
    if config.group_protocol not in client.group_protocols:
        raise ValueError(f"{config.client} has no group.protocol={config.group_protocol} "
                         f"(it has {', '.join(client.group_protocols)})")
    client.group_protocol = config.group_protocol
    # churning members stall past it (_churn.MEMBER_FAULTS)
    client.max_poll_interval_ms = MAX_POLL_INTERVAL_MS if config.churn else None
    say = on_phase or (lambda text: None)
    tmp = None if config.data_dir is not None else tempfile.mkdtemp(prefix="kaflite-verify-")
    data_dir = config.data_dir or Path(tmp or ".")
    history = History()
    excluded = {k: why for k, why in client.known_issues.get(config.workload, {}).items()
                if k in config.nemesis}
    meta = config.meta()
    cluster = _target(config, data_dir)
    known_errors = {**client.known_errors.get(config.workload, {}), **cluster.excluded_errors}
    if known_errors and "errors" in config.nemesis:
        meta["excluded_errors"] = {f"{api} {error}": why
                                   for (api, error), why in known_errors.items()}
    if cluster.kinds is not None:
        excluded.update({k: cluster.left_out.get(k, f"{cluster.name} takes no such fault")
                         for k in config.nemesis if k not in cluster.kinds})
    if cluster.means:     # how each fault the run can apply is applied
        meta["fault_means"] = {k: cluster.means[k] for k in config.nemesis
                               if k in cluster.means and k not in excluded}
    if excluded:
        meta["excluded_faults"] = excluded
        config = replace(config, nemesis=tuple(k for k in config.nemesis if k not in excluded))
    readers = client.readers_per_group
    if readers is not None and config.consumers > readers:
        say(f"{config.client} runs {readers} reader(s) per group, not {config.consumers}")
        config = replace(config, consumers=readers)
        meta["consumers"] = readers
    for what, why in exclusions(meta):
        say(f"left out of {config.client}'s {config.workload} run: {what}: {why}")
    history.add(Meta(time=history.now(), process="run", config=meta))
    try:
        client.start()
        cluster.start()
        say(f"cluster up: {cluster.bootstrap_servers}")
        shared = Shared(history, client, cluster.bootstrap_servers, config.seed)
        shared.churn = config.churn
        if config.filler_partitions:
            fill_partitions(cluster.bootstrap_servers, config.filler_partitions)
            say(f"{config.filler_partitions} idle partitions created")
        probe = ApiVersionsProbe(cluster.bootstrap_servers).start()
        try:
            if config.workload == "queue":
                _queue(config, cluster, shared, say)
            else:
                _txn(config, cluster, shared, say)
        finally:
            for event in (shared.writers_stop, shared.transformers_stop, shared.readers_stop):
                event.set()
            if shared.nemesis is not None:
                shared.nemesis.stop()
            history.add(Probe(time=history.now(), process="probe", stats=probe.stop()))
            # a crashed member's client still tearing down now never will (a library's
            # destroy that does not return; _confluent.abandon says which)
            _join(history, shared.abandoned, ABANDONED_JOIN_S)
        history.add(Phase(time=history.now(), process="run", name="done"))
    finally:
        cluster.stop()
        _add_removals(history, cluster)
        if config.history is not None:
            history.dump(config.history)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        client.close()
    return history, check(history.ops)


def _target(config: RunConfig, data_dir: Path) -> FaultTarget:
    """The cluster the run starts and hurts."""
    if config.via_proxy and config.target != "kafka":
        raise ValueError("--via-proxy puts kaflite's proxy in front of --target kafka "
                         "(kaflite's own cluster takes every fault itself)")
    if config.target == "kaflite":
        cluster_config: dict[str, Any] = dict(CLUSTER_CONFIG)
        if config.request_log:
            cluster_config[REQUEST_LOG_ENABLE] = "true"
        return ClusterProcess(data_dir / "cluster", config=cluster_config,
                              processes=config.processes)
    if config.target != "kafka":
        raise ValueError(f"unknown target {config.target!r}: kaflite or kafka")
    if config.kafka_libs is None:
        raise ValueError("--target kafka needs --kafka-libs (the directory "
                         "tools/ensure_kafka.sh prints)")
    if config.churn or config.processes:
        raise ValueError("--churn and --processes need kaflite's own cluster")
    from kaflite.verify.targets import KafkaTarget
    return KafkaTarget(config.kafka_libs, dict(CLUSTER_CONFIG), via_proxy=config.via_proxy)


def _add_removals(history: History, cluster: FaultTarget) -> None:
    """The coordinators' side of the membership, on the run's clock: each member they
    removed, under the process whose consumer it was (client ids are ``process.n``)."""
    for r in cluster.removals():
        client = str(r["client_id"])
        history.add(Removed(time=float(r["monotonic"]) - history.t0,
                            process=client.rsplit(".", 1)[0], group=str(r["group"]),
                            client=client, member_id=str(r["member_id"]),
                            protocol=str(r["protocol"]), cause=str(r["cause"])))


def _create(servers: str, topics: dict[str, int], timeout_ms: int | None = None) -> None:
    from kaflite.client import NewTopic
    from kaflite.client.sync import Admin

    config: dict[str, object] = {"bootstrap.servers": servers}
    if timeout_ms is not None:
        config.update({"request.timeout.ms": timeout_ms, "default.api.timeout.ms": timeout_ms})
    admin = Admin(config)
    try:
        admin.create_topics([NewTopic(t, n, 3, {"min.insync.replicas": "2"})
                             for t, n in topics.items()])
    finally:
        admin.close()


def fill_partitions(servers: str, partitions: int, per_topic: int = 100,
                    per_request: int = 1000) -> None:
    """Idle topics holding ``partitions`` partitions at RF 3: a cluster as large as a
    user's, whose metadata every change and every Metadata request must carry. At most
    ``per_request`` partitions a CreateTopics (a request may create 10,000 at most)."""
    sizes = [per_topic] * (partitions // per_topic)
    if partitions % per_topic:
        sizes.append(partitions % per_topic)
    topics = {f"filler-{i}": n for i, n in enumerate(sizes)}
    names = list(topics)
    step = max(1, per_request // per_topic)
    for k in range(0, len(names), step):
        # a thousand partitions take a while: each is a log on disk
        _create(servers, {t: topics[t] for t in names[k:k + step]}, timeout_ms=600_000)


def _nemesis(config: RunConfig, cluster: FaultTarget, history: History,
             targets: Targets) -> Nemesis:
    steps = plan(random.Random(config.seed), config.nemesis, config.seconds, targets)
    return Nemesis(cluster, history, steps, targets).start()


def _start_nemesis(config: RunConfig, cluster: FaultTarget, shared: Shared,
                   targets: Targets) -> Nemesis:
    shared.history.add(Phase(time=shared.history.now(), process="run", name="nemesis-start"))
    if "errors" in config.nemesis:
        known = {*shared.factory.known_errors.get(config.workload, {}),
                 *cluster.excluded_errors}
        targets = replace(targets, excluded_errors=frozenset(known))
    shared.nemesis = _nemesis(config, cluster, shared.history, targets)
    return shared.nemesis


def _heal(nemesis: Nemesis, history: History, say: Callable[[str], None]) -> None:
    nemesis.stop()
    history.add(Phase(time=history.now(), process="run", name="healed"))
    say("nemesis healed")


def _queue(config: RunConfig, cluster: FaultTarget, shared: Shared,
           say: Callable[[str], None]) -> None:
    topic, group, history = "queue", "verify-queue", shared.history
    topics = {topic: config.partitions}
    share = config.group_protocol == "share"
    if config.churn and shared.factory.resubscribes and not share:
        topics[IDLE_TOPIC] = IDLE_PARTITIONS
        shared.idle_topic = IDLE_TOPIC
    _create(cluster.bootstrap_servers, topics)
    if share:
        _share_group_configs(cluster.bootstrap_servers, group)
        shared.share_delivery_limit = int(SHARE_GROUP_CONFIGS["share.delivery.count.limit"])
    member = share_consumer_process if share else consumer_process
    readers = [start_daemon(f"consumer-{i}", member, shared, f"consumer-{i}", topic, group)
               for i in range(config.consumers)]
    # Odd producers key each record by its value, even ones send without a key (sticky).
    writers = [start_daemon(f"producer-{i}", producer_process, shared, f"producer-{i}", topic,
                       config.rate, i % 2 == 1) for i in range(config.producers)]
    nemesis = _start_nemesis(config, cluster, shared, Targets({topic: config.partitions},
                                                              (group,)))
    _nemesis_window(config, nemesis, shared)
    _heal(nemesis, history, say)
    shared.writers_stop.set()
    _join(history, writers, 60)
    history.add(Phase(time=history.now(), process="run", name="writers-done", topic=topic))
    last = _drain(shared, topic, config.partitions, transactional=False)
    say("drained; waiting for the group to catch up")
    if share:
        _share_catch_up(shared, topic, config.progress_bound)
    else:
        _catch_up(shared, group, topic, last, config.progress_bound)
    shared.readers_stop.set()
    _join(history, readers, 60)


def _share_group_configs(servers: str, group: str) -> None:
    """Set the share group's configs, and read them back: the checker judges the run by
    what the group runs with (``RunConfig.meta``'s ``share_group_configs``)."""
    from kaflite.client import ConfigResource
    from kaflite.client.sync import Admin

    resource = ConfigResource(32, group)     # a GROUP resource
    admin = Admin({"bootstrap.servers": servers})
    try:
        admin.alter_configs({resource: SHARE_GROUP_CONFIGS})
        got = admin.describe_configs([resource])[resource]
    finally:
        admin.close()
    wrong = {k: (v, got.get(k)) for k, v in SHARE_GROUP_CONFIGS.items() if got.get(k) != v}
    if wrong:
        raise RuntimeError(f"the share group does not run with its configs: {wrong}")


def _share_catch_up(shared: Shared, topic: str, bound: float) -> None:
    """Wait until the members have finished (accepted, rejected, or seen delivered up to
    the delivery limit) every record of the drained log, for ``bound`` seconds."""
    h = shared.history
    want = {(topic, d.partition, o) for d in h.of(Drain)
            if d.topic == topic and d.isolation == "read_uncommitted" for o, _ in d.records}
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if want.issubset(shared.share_done):
            h.add(Phase(time=h.now(), process="run", name="caught-up", topic=topic))
            return
        time.sleep(0.1)
    h.add(Phase(time=h.now(), process="run", name="not-caught-up", topic=topic))


def _txn(config: RunConfig, cluster: FaultTarget, shared: Shared,
         say: Callable[[str], None]) -> None:
    source, sink, history = "vin", "vout", shared.history
    ctp, readers_group = "verify-ctp", "verify-readers"
    n = config.partitions
    _create(cluster.bootstrap_servers, {source: n, sink: n})
    readers = [start_daemon(f"reader-{i}", consumer_process, shared, f"reader-{i}", sink,
                       readers_group, "read_committed") for i in range(config.consumers)]
    transformers = [start_daemon(f"transformer-{i}", transformer_process, shared,
                            f"transformer-{i}", source, sink, ctp)
                    for i in range(config.consumers)]
    writers = [start_daemon(f"txn-producer-{i}", txn_producer_process, shared, f"txn-producer-{i}",
                       source, config.rate) for i in range(config.producers)]
    txn_ids = tuple(f"txn-producer-{i}" for i in range(config.producers)) + \
        tuple(f"transformer-{i}" for i in range(config.consumers))
    nemesis = _start_nemesis(config, cluster, shared,
                             Targets({source: n, sink: n}, (ctp, readers_group), txn_ids))
    _nemesis_window(config, nemesis, shared)
    _heal(nemesis, history, say)
    shared.writers_stop.set()
    _join(history, writers, 90)
    history.add(Phase(time=history.now(), process="run", name="writers-done", topic=source))
    last = _drain(shared, source, n, transactional=True)
    say("input drained; waiting for the transformers")
    _catch_up(shared, ctp, source, last, config.progress_bound)
    shared.transformers_stop.set()
    _join(history, transformers, 90)
    history.add(Phase(time=history.now(), process="run", name="writers-done", topic=sink))
    last = _drain(shared, sink, n, transactional=True)
    say("output drained; waiting for the readers")
    _catch_up(shared, readers_group, sink, last, config.progress_bound)
    shared.readers_stop.set()
    _join(history, readers, 60)


def _sleep(seconds: float, stop: threading.Event) -> None:
    stop.wait(seconds)


MIN_FAULTS = 3


def _nemesis_window(config: RunConfig, nemesis: Nemesis, shared: Shared) -> None:
    """``config.seconds`` of faults, and longer (up to twice that again) until the
    nemesis has reached the first step of each kind in its plan, and at least its first
    ``MIN_FAULTS`` steps. Its thread runs steps one at a time, so a slow one holds the
    rest back: on a loaded machine a whole-cluster crash and restart took a 10 s round's
    window, and the round ran one fault; another round with broker processes ran four
    faults and never the crash its plan held."""
    _sleep(config.seconds, shared.writers_stop)
    first: dict[str, int] = {}
    for i, step in enumerate(nemesis.steps):
        first.setdefault(step.kind, i)
    want = min(max(MIN_FAULTS, max(first.values(), default=-1) + 1), len(nemesis.steps))
    deadline = time.monotonic() + 2 * config.seconds
    while nemesis.finished < want and time.monotonic() < deadline \
            and not shared.writers_stop.is_set():
        time.sleep(0.1)


def _catch_up(shared: Shared, group: str, topic: str, last: dict[int, int],
              bound: float) -> None:
    """Wait until ``group`` has reached each partition's last record, for ``bound`` s."""
    deadline = time.monotonic() + bound
    h = shared.history
    while time.monotonic() < deadline:
        if all(shared.progress[(group, topic, p)] >= o for p, o in last.items() if o >= 0):
            h.add(Phase(time=h.now(), process="run", name="caught-up", topic=topic))
            return
        time.sleep(0.1)
    h.add(Phase(time=h.now(), process="run", name="not-caught-up", topic=topic))


def _drain(shared: Shared, topic: str, partitions: int, transactional: bool) -> dict[int, int]:
    """Drain ``topic`` into the history; the last offset of each partition's records
    (read_committed where transactional), -1 for an empty one."""
    levels = ["read_uncommitted"] + (["read_committed"] if transactional else [])
    last: dict[int, int] = {}
    for isolation in levels:
        found = asyncio.run(_read_all(shared, topic, partitions, isolation))
        for part, (records, end) in sorted(found.items()):
            shared.history.add(Drain(
                time=shared.history.now(), process="drain", topic=topic, partition=part,
                isolation=isolation, records=tuple(records), end_offset=end))
            last[part] = records[-1][0] if records else -1
    h = shared.history
    h.add(Phase(time=h.now(), process="run", name="drained", topic=topic))
    return last


async def _read_all(shared: Shared, topic: str, partitions: int, isolation: str,
                    timeout: float = 90) -> dict[int, tuple[list[tuple[int, int]], int]]:
    from kaflite.client import Consumer, TopicPartition
    from kaflite.verify.clients._base import decode

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    records: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
    config = {"bootstrap.servers": shared.servers, "client.id": f"drain-{isolation}",
              "isolation.level": isolation, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    async with Consumer(config) as c:
        ends = await c.end_offsets(tps)
        if isolation == "read_committed":
            ends = await _settled(shared.servers, c, tps, ends, timeout)
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = [await c.position(tp) >= ends.get(tp, 0) for tp in tps]
            if all(done):
                break
            for tp, recs in (await c.getmany(timeout_ms=300)).items():
                records[tp.partition] += [(r.offset, decode(r.value)) for r in recs]
        else:
            shared.history.add(Note(time=shared.history.now(), process="drain",
                                    text=f"the drain of {topic} ({isolation}) timed out"))
    return {p: (recs, ends.get(TopicPartition(topic, p), -1)) for p, recs in records.items()}


async def _settled(servers: str, c: Any, tps: list[Any], lso: dict[Any, int],
                   timeout: float) -> dict[Any, int]:
    """The last stable offsets once no transaction is open (LSO = high watermark).

    A commit returns before its markers are written, and a producer that died in a
    transaction leaves it open until ``transaction.timeout.ms``: until then the
    committed view is not final.
    """
    from kaflite.client import Consumer

    deadline = time.monotonic() + timeout
    async with Consumer({"bootstrap.servers": servers, "client.id": "drain-hw"}) as plain:
        while time.monotonic() < deadline:
            hw = await plain.end_offsets(tps)
            if all(lso.get(tp, -1) >= hw.get(tp, 0) for tp in tps):
                break
            await asyncio.sleep(0.2)
            lso = await c.end_offsets(tps)
    return lso
