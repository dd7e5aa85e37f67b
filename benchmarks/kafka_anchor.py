"""The anchor for speed (issue 37 §6): the same loads against 3-node Apache Kafka and
3-broker kaflite, one target after the other, in one run.

    python benchmarks/kafka_anchor.py [--records 200000] [--size 1024] [--repeat 1]
        [--targets kafka,kaflite,kaflite-processes] [--loads java-producer,...] [--quick]

Targets, each started, measured and stopped by this script on loopback:

* ``kafka``: Apache Kafka 4.4.0 (``tools/ensure_kafka.sh``'s jars), three KRaft nodes
  each broker and controller (``kaflite.testing.ApacheKafka``), with the JVM flags of
  Kafka's own scripts (``kafka-server-start.sh``: 1 GiB heap, G1, C2), not the test
  harness's small C1-only JVMs (``--kafka-jvm tests`` for those);
* ``kaflite``: ``kaflite up --brokers 3``, every broker on one event loop in one process;
* ``kaflite-processes``: ``kaflite up --brokers 3 --processes``, a process per broker.

kaflite runs as ``kaflite up`` in a process of its own rather than as
``kaflite.testing.KafliteCluster`` in this one, so that its CPU time is its own and it
is the server users run (``kaflite up`` also sets the collector policy).

On each target: a topic of ``--partitions`` (6) partitions, replication factor 3,
min.insync.replicas=2; a warm-up (librdkafka writing ``--warmup`` records to another
topic and reading them back, untimed: Apache Kafka's JIT compiles its hot paths in the
first minute of load, and round 1 without it was up to 2.7x slower than round 2); the
brokers' idle CPU over 5 s; then ``--repeat`` rounds of the loads, each load a process
of its own (``anchor_loads.py``), in this order:

* ``java-producer``: ``kafka-producer-perf-test`` (``ProducerPerformance``), acks=all;
* ``java-producer-1m``: the same with ``batch.size=1048576``, kaflite's default (and
  about librdkafka's), so that the clients can be compared batch for batch;
* ``rdkafka-producer``, ``kaflite-producer``: the same load from confluent-kafka and
  kaflite's sync ``Producer``;
* ``java-producer-paced``: ``kafka-producer-perf-test`` at ``--paced-rate`` records a
  second (2,000, 2 MB/s) for 10 s: at full speed every producer's latency is mostly
  the time its records wait in its own 32 MiB buffer; paced, it is the brokers';
* ``java-consumer``: ``kafka-consumer-perf-test`` (``ConsumerPerformance``);
* ``rdkafka-consumer``, ``kaflite-consumer``: the same from confluent-kafka and
  kaflite's sync ``Consumer``. Every consumer reads the records of the first producer
  load (``java-producer``'s by default), so that all read the same batches.

Broker CPU: utime + stime (``/proc/<pid>/stat``) of the target's processes and their
descendants, read before and after each load, over the MB (10^6 bytes of record values)
the load moved. Client CPU: the load process's own (``RUSAGE_CHILDREN``). The table
(``anchor_table.py``) gives each load on each target, with its ratios to Apache Kafka's,
and kaflite's and librdkafka's clients over the Java client, all against Apache Kafka.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))   # anchor_loads, beside this
from anchor_loads import (
    LoadResult,
    java_consumer_args,
    java_producer_args,
    parse_java_consumer,
    parse_java_producer,
)
from anchor_table import Measured, client_ratios, report, summary, table

from kaflite.testing import ApacheKafka, ClusterUnderTest, TargetUnavailable, Unsupported
from kaflite.testing._kafka_node import JVM_OPTS, java_executable
from kaflite.testing._probe import brokers_seen, run_blocking

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("kafka", "kaflite", "kaflite-processes")
PRODUCERS = ("java-producer", "java-producer-1m", "rdkafka-producer", "kaflite-producer",
             "java-producer-paced")
BIG_BATCH = 1_048_576    # java-producer-1m's batch.size: kaflite's default
PACED_S = 10             # java-producer-paced runs this long, at --paced-rate
CONSUMERS = ("java-consumer", "rdkafka-consumer", "kaflite-consumer")
LOADS = PRODUCERS + CONSUMERS
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS, with kafka-server-start.sh's heap
# for the brokers and kafka-{producer,consumer}-perf-test.sh's for the tools
_PERFORMANCE = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
BROKER_JVM = ("-Xmx1G", "-Xms1G", *_PERFORMANCE)
TOOL_JVM = ("-Xmx512M", *_PERFORMANCE)
START_TIMEOUT_S = 120.0
IDLE_SETTLE_S = 2.0     # after the warm-up, before the idle CPU is read
IDLE_S = 5.0            # how long the idle CPU is read


# -- CPU time from /proc -----------------------------------------------------------------
def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime so far of ``pids`` and all their live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                children.setdefault(int(_stat(int(entry))[1]), []).append(int(entry))
    seen: set[int] = set()
    total, todo = 0, list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        with contextlib.suppress(OSError, IndexError):
            fields = _stat(pid)
            total += int(fields[11]) + int(fields[12])
        todo += children.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU seconds of this process's children that have ended and been waited for."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# -- kaflite up in a process of its own ---------------------------------------------------
class KafliteUp(ClusterUnderTest):
    """``kaflite up --brokers N [--processes]`` as a child process, on any free ports,
    its data and its registration (``KAFLITE_STATE_DIR``) in a temporary directory."""

    def __init__(self, brokers: int = 3, processes: bool = False,
                 start_timeout: float = START_TIMEOUT_S) -> None:
        self.name = f"kaflite-{brokers}{'p' if processes else ''}"
        self._brokers = brokers
        self._processes = processes
        self.start_timeout = start_timeout
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._bootstrap = ""

    @property
    def node_ids(self) -> list[int]:
        return list(range(self._brokers))

    @property
    def bootstrap_servers(self) -> str:
        if not self._bootstrap:
            raise RuntimeError(f"{self.name} is not running")
        return self._bootstrap

    def _output(self) -> str:
        if self._dir is None:
            return ""
        with contextlib.suppress(OSError):
            return (self._dir / "up.out").read_text(errors="replace")
        return ""

    def start(self) -> None:
        if self._proc is not None:
            raise RuntimeError(f"{self.name} is already started")
        self._dir = Path(tempfile.mkdtemp(prefix=f"kaflite-anchor-{self.name}-"))
        env = {**os.environ, "KAFLITE_STATE_DIR": str(self._dir / "state")}
        with (self._dir / "up.out").open("wb") as out:
            # a session of its own: a Ctrl-C here reaches stop(), not the brokers first
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "kaflite.cli", "up", "--brokers", str(self._brokers),
                 "--base-port", "0", "--http-port", "-1", "--data-dir",
                 str(self._dir / "data"), *(["--processes"] if self._processes else [])],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while not self._bootstrap:
            if self._proc.poll() is not None:
                raise RuntimeError(f"kaflite up exited with {self._proc.returncode}:\n"
                                   f"{self._output()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"kaflite up did not start:\n{self._output()[-3000:]}")
            for line in self._output().splitlines():
                if line.startswith("bootstrap.servers="):
                    self._bootstrap = line.removeprefix("bootstrap.servers=").strip()
            time.sleep(0.1)
        for address in self._bootstrap.split(","):
            while run_blocking(brokers_seen(address), 10.0) != set(self.node_ids):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{address} does not list {self.node_ids}")
                time.sleep(0.25)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        self._bootstrap = ""
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)   # kaflite up's graceful stop
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc is not None:
            # broker processes left behind by a killed parent share its process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        directory, self._dir = self._dir, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)

    def kill(self, node_id: int) -> None:
        raise Unsupported(f"{self.name}: the anchor benchmark kills no broker")

    def restart(self, node_id: int) -> None:
        raise Unsupported(f"{self.name}: the anchor benchmark restarts no broker")

    def pids(self) -> list[int]:
        """The ``kaflite up`` process (its broker processes are its children)."""
        return [self._proc.pid] if self._proc is not None and self._proc.poll() is None else []


def make_target(name: str, libs: Path | None, kafka_jvm: Sequence[str]) -> ClusterUnderTest:
    if name == "kafka":
        assert libs is not None
        return ApacheKafka(libs, brokers=3, jvm_opts=kafka_jvm)
    return KafliteUp(3, processes=name == "kaflite-processes")


def kafka_libs() -> Path:
    """tools/ensure_kafka.sh's libs/ (it fetches the jars once, then answers at once)."""
    proc = subprocess.run(["bash", str(ROOT / "tools" / "ensure_kafka.sh")],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise TargetUnavailable(f"tools/ensure_kafka.sh failed:\n{proc.stderr[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


# -- topics --------------------------------------------------------------------------------
def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """RF 3, min.insync.replicas=2; returns once every partition has a leader and three
    in-sync replicas."""
    from kaflite.client.admin import NewTopic
    from kaflite.client.sync import Admin

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 3,
                                      {"min.insync.replicas": "2"})])
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(Exception):
                meta = admin.describe_topics([topic])[topic]
                if len(meta.partitions) == partitions and all(
                        p.leader >= 0 and len(p.isr) == 3 for p in meta.partitions):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} has no leaders or full ISR after 60 s")
            time.sleep(0.2)


def delete_topic(bootstrap: str, topic: str) -> None:
    from kaflite.client.sync import Admin

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.delete_topics([topic])


# -- running the loads ------------------------------------------------------------------
@dataclass
class Plan:
    """What every target runs: the loads, their size, and how each load process runs."""

    loads: Sequence[str]
    records: int
    size: int
    partitions: int
    warmup: int
    repeat: int
    libs: Path | None
    logs: Path
    timeout: float
    paced_rate: int = 2000


def run_load(plan: Plan, load: str, bootstrap: str, topic: str, records: int,
             log: str) -> LoadResult:
    """One load in a process of its own; raises with its output when it fails. ``log``
    names its output file in ``plan.logs``."""
    libs, size = plan.libs, plan.size
    if load.startswith("java-"):
        if libs is None:
            raise TargetUnavailable("the Java loads need Kafka's jars")
        args = (java_consumer_args(bootstrap, topic, records) if load == "java-consumer"
                else java_producer_args(
                    bootstrap, topic, records, size,
                    BIG_BATCH if load == "java-producer-1m" else None,
                    plan.paced_rate if load == "java-producer-paced" else -1))
        cmd = [java_executable(), *TOOL_JVM,
               f"-Dlog4j2.configurationFile={libs.parent / 'log4j2.properties'}",
               f"-Dkaflite.kafka.log={plan.logs / (log + '.log')}", "-cp", f"{libs}/*", *args]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve().parent / "anchor_loads.py"),
               load, bootstrap, topic, str(records), str(size)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=plan.timeout,
                          stdin=subprocess.DEVNULL)
    (plan.logs / f"{log}.out").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{load} exited with {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
    if load.startswith("java-producer"):
        result = parse_java_producer(proc.stdout)
    elif load == "java-consumer":
        result = parse_java_consumer(proc.stdout)
    else:
        result = LoadResult.from_json(proc.stdout.strip().splitlines()[-1])
    if result.records < records:
        raise RuntimeError(f"{load} moved {result.records} of {records} records:\n"
                           f"{proc.stdout[-2000:]}")
    return result


def measure(plan: Plan, target: ClusterUnderTest, label: str, load: str, topic: str,
            log: str) -> Measured:
    pids = target.pids()
    began = time.monotonic()
    client_before = children_cpu()
    broker_before = cpu_seconds(pids)
    records = plan.paced_rate * PACED_S if load == "java-producer-paced" else plan.records
    result = run_load(plan, load, target.bootstrap_servers, topic, records, log)
    broker = cpu_seconds(pids) - broker_before
    client = children_cpu() - client_before
    return Measured(label, load, result, plan.size, broker, client, time.monotonic() - began,
                    os.getloadavg()[0])


def run_target(plan: Plan, label: str, target: ClusterUnderTest, failures: list[str],
               idle: dict[str, float]) -> list[Measured]:
    """Start ``target``, warm it up, measure its idle CPU (into ``idle``), run every load
    ``plan.repeat`` times (rounds of all the producers, then all the consumers); the
    caller stops it."""
    plan = dataclasses.replace(plan, logs=plan.logs / label)
    plan.logs.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    target.start()
    print(f"[{label}] started in {time.monotonic() - began:.1f} s: "
          f"{target.bootstrap_servers} (pids {target.pids()})", flush=True)
    bootstrap = target.bootstrap_servers
    if plan.warmup:
        create_topic(bootstrap, "anchor-warmup", plan.partitions)
        run_load(plan, "rdkafka-producer", bootstrap, "anchor-warmup", plan.warmup, "warmup")
        run_load(plan, "rdkafka-consumer", bootstrap, "anchor-warmup", plan.warmup,
                 "warmup-read")
        delete_topic(bootstrap, "anchor-warmup")
    # what the brokers cost doing nothing (heartbeats, the controller quorum, timers):
    # every load's CPU-s include it for the load's duration. A rough figure: read over
    # 5 s just after the warm-up, a JVM may still be compiling or collecting
    time.sleep(IDLE_SETTLE_S)
    before = cpu_seconds(target.pids())
    time.sleep(IDLE_S)
    idle[label] = (cpu_seconds(target.pids()) - before) / IDLE_S
    print(f"[{label}] idle: {idle[label]:.3f} CPU-s per second", flush=True)
    out: list[Measured] = []
    producers = [ld for ld in plan.loads if ld in PRODUCERS]
    consumers = [ld for ld in plan.loads if ld in CONSUMERS]
    for n in range(1, plan.repeat + 1):
        source = ""     # the round's first producer topic, which every consumer reads
        if consumers and not producers:     # fill a topic for them, untimed
            source = f"anchor-fill-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, source, plan.partitions)
            run_load(plan, "rdkafka-producer", bootstrap, source, plan.records, f"fill-{n}")
        for load in producers:
            topic = f"anchor-{load}-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, plan.partitions)
            m = _attempt(plan, target, label, load, topic, n, failures)
            if m is not None:
                out.append(m)
            if not source and m is not None:
                source = topic
            else:   # not read again: its disk space and dirty pages go now
                delete_topic(bootstrap, topic)
        for load in consumers:
            if not source:
                failures.append(f"{label} {load}: no producer load wrote its records")
                continue
            if (m := _attempt(plan, target, label, load, source, n, failures)) is not None:
                out.append(m)
        if source:
            delete_topic(bootstrap, source)
    return out


def _attempt(plan: Plan, target: ClusterUnderTest, label: str, load: str, topic: str,
             round_: int, failures: list[str]) -> Measured | None:
    """One load, measured and reported; a failure is reported, kept in ``failures``,
    and the next load runs."""
    try:
        m = measure(plan, target, label, load, topic, f"{load}-{round_}")
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
        failures.append(f"{label} {load} (round {round_}): "
                        f"{str(exc).strip().splitlines()[-1][:300]}")
        print(f"[{label}] {load:17} FAILED: {exc}", file=sys.stderr, flush=True)
        return None
    print(report(m, round_), flush=True)
    return m


# -- main -----------------------------------------------------------------------------------
def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return [n for n in known if n in names]     # the canonical order


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def stopped_on_exit(target: ClusterUnderTest) -> Iterator[ClusterUnderTest]:
    try:
        yield target
    finally:
        target.stop()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--records", type=int, default=200_000, help="records per load")
    ap.add_argument("--size", type=int, default=1024, help="record size in bytes")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--targets", default=",".join(TARGETS),
                    help=f"comma-separated, of {', '.join(TARGETS)}")
    ap.add_argument("--loads", default=",".join(LOADS), help=f"comma-separated, of {', '.join(LOADS)}")
    ap.add_argument("--warmup", type=int, default=300_000,
                    help="records librdkafka produces, untimed, before the loads")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds, per load")
    ap.add_argument("--paced-rate", type=int, default=2000,
                    help="java-producer-paced's records per second (for 10 s)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of every load on each target; the table shows medians")
    ap.add_argument("--kafka-jvm", choices=("scripts", "tests"), default="scripts",
                    help="Kafka's JVM flags: its scripts' (1 GiB, G1, C2) or the test "
                         "harness's (512 MiB, serial GC, C1 only)")
    ap.add_argument("--quick", action="store_true",
                    help="a small run to check the script: 20,000 records, 5,000 warm-up")
    ap.add_argument("--logs", type=Path, help="keep each load's output here "
                    "(default: a temporary directory, removed at the end)")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.warmup = min(args.records, 20_000), min(args.warmup, 5_000)
    targets = _names(args.targets, TARGETS, "targets")
    loads = _names(args.loads, LOADS, "loads")
    signal.signal(signal.SIGTERM, _interrupted)
    needs_jars = "kafka" in targets or any(ld.startswith("java-") for ld in loads)
    libs = kafka_libs() if needs_jars else None
    kafka_jvm = BROKER_JVM if args.kafka_jvm == "scripts" else JVM_OPTS
    logs = args.logs or Path(tempfile.mkdtemp(prefix="kaflite-anchor-logs-"))
    print(f"{args.records:,} records of {args.size} B per load, {args.partitions} partitions, "
          f"RF 3, min.insync.replicas=2, acks=all; warm-up {args.warmup:,}; "
          f"{args.repeat} round(s); "
          f"load average {os.getloadavg()[0]:.1f}; logs in {logs}", flush=True)
    plan = Plan(loads, args.records, args.size, args.partitions, args.warmup, args.repeat,
                libs, logs, args.timeout, args.paced_rate)
    results: list[Measured] = []
    failed: list[str] = []
    idle: dict[str, float] = {}
    try:
        for name in targets:
            try:
                with stopped_on_exit(make_target(name, libs, kafka_jvm)) as target:
                    results += run_target(plan, name, target, failed, idle)
            except (Exception, subprocess.TimeoutExpired) as exc:   # the next target runs
                failed.append(f"{name}: {type(exc).__name__}")
                print(f"[{name}] FAILED: {type(exc).__name__}: {exc}", file=sys.stderr,
                      flush=True)
            print(f"[{name}] stopped; load average {os.getloadavg()[0]:.1f}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: every target is stopped", file=sys.stderr)
        return 130
    finally:
        if args.logs is None:
            shutil.rmtree(logs, ignore_errors=True)
    print(f"\n{args.records:,} records of {args.size} bytes per load"
          f"{f', median of {args.repeat} rounds' if args.repeat > 1 else ''}; MB = 10^6 "
          f"bytes of record values; latency from send to acks=all acknowledgement\n")
    print(table(results, loads, targets))
    for block in (summary(results, targets), client_ratios(results)):
        if block:
            print("\n" + block)
    if idle:
        print("\nbrokers idle (CPU-s per second, measured after the warm-up): "
              + ", ".join(f"{name} {rate:.3f}" for name, rate in idle.items()))
    if failed:
        print("\nfailed (see above):\n" + "\n".join(f"- {f}" for f in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
