"""Spark batch throughput: the kaflite source beside baselines and Spark's own connector.

    python benchmarks/spark_source.py [--records 5000000] [--size 100] [--repeat 5] [--cpu]

One kaflite broker (``kaflite up --brokers 1``, its own process) holds a topic of
``--records`` records of ``--size`` random bytes (null keys) in ``--partitions``
partitions, written by confluent-kafka. A ``local[2]`` SparkSession then reads
the whole topic three ways and writes it to Spark's ``noop`` sink (every row of
every column is materialised, nothing is stored):

* **memory**: a Python data source that yields the same rows from memory as
  ``pyarrow.RecordBatch`` es, prebuilt in each task: Spark's own cost of taking
  Arrow batches from a Python worker; the upper bound for any Python source;
* **kaflite**: ``spark.read.format("kaflite")``;
* **kafka**: ``spark.read.format("kafka")``, Spark's own connector (Java,
  ``spark-sql-kafka-0-10`` and kafka-clients, from ``tools/ensure_spark_kafka.sh``
  as local jars in ``spark.jars``);
* **confluent-kafka**: a Python data source whose tasks read the same offset
  ranges with confluent-kafka's ``Consumer.consume`` (librdkafka) and build
  the same Arrow batches from the messages.

The reads run in ``--repeat`` rounds after a warm-up round, each round reading
once with the memory, the kaflite and the kafka source in turn; the
confluent-kafka source then runs its own ``--confluent-repeat`` rounds (its
18-second reads would otherwise disturb the reads that follow them). The table
shows each source's best run in rows/s and MB/s (value bytes), and the ratios;
the kaflite/memory and kafka/kaflite ratios of every round are printed too.

Then the writes (``write-kaflite``, ``write-kafka``): one DataFrame of
``--write-records`` rows (``spark.range`` with a ``--size``-byte value, no key,
made in the JVM) written with ``df.write.format("kaflite")`` and with
``format("kafka")``, each to a fresh topic of ``--partitions`` partitions, in
``--write-repeat`` rounds after a warm-up round, in turn within a round. Each
connector runs with its producer's defaults (kaflite: acks=all, idempotent,
linger.ms 5, batch.size 1 MiB; Spark's, kafka-clients 3.9: acks=all,
idempotent, linger.ms 0, batch.size 16 KiB). Every written topic is checked to
hold the rows (not timed), then deleted.

This is a benchmark, not a test: the numbers move with whatever else runs on
the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TOPIC = "spark-bench"
READS = ("memory", "kaflite", "kafka", "confluent-kafka")
WRITES = {"write-kaflite": "kaflite", "write-kafka": "kafka"}   # --only name: format
ALL = [*READS, *WRITES]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def kaflite_broker() -> Iterator[str]:
    port = free_port()
    data = tempfile.mkdtemp(prefix="kaflite-spark-bench-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite.cli", "up", "--brokers", "1", "--base-port", str(port),
         "--data-dir", data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the kaflite broker did not start") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    time.sleep(0.5)


def topic_records(bootstrap: str, topic: str, partitions: int) -> int:
    """The records in ``topic``: the sum of its partitions' high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        c.close()


def delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})   # (no info lines)
    admin.delete_topics([topic])[topic].result(30)


def spark_kafka_jars() -> str | None:
    """Spark's own connector's jars for ``spark.jars`` (``tools/ensure_spark_kafka.sh``),
    or None, saying why, when they cannot be had."""
    script = Path(__file__).resolve().parents[1] / "tools" / "ensure_spark_kafka.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHON": sys.executable})
    if proc.returncode != 0:
        print(f"note: Spark's kafka connector is unavailable, its columns are left out: "
              f"{proc.stderr.strip()[-500:]}", flush=True)
        return None
    return proc.stdout.strip().splitlines()[-1]


def fill_topic(bootstrap: str, records: int, size: int, partitions: int) -> None:
    from confluent_kafka import Producer

    create_topic(bootstrap, TOPIC, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20,
                         "batch.size": int(os.environ.get("BENCH_BATCH_SIZE", "1000000")), "queue.buffering.max.kbytes": 524288,
                         "queue.buffering.max.messages": 1_000_000,
                         "enable.idempotence": False})
    payload = os.urandom(size)
    t = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    dt = time.perf_counter() - t
    print(f"wrote {records:,} records of {size} bytes in {dt:.1f}s", flush=True)


# -- CPU per thread, from /proc (Linux) ---------------------------------------------------------
def _descendants() -> set[str]:
    """The pids of this process's descendants (the broker, Spark's JVM, its Python
    processes): other people's JVMs and brokers on a shared machine are not counted."""
    children: dict[str, list[str]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(stat).read_text()
        except OSError:
            continue
        children.setdefault(text[text.rindex(")") + 2:].split()[1], []).append(
            stat.split("/")[2])
    found: set[str] = set()
    todo = [str(os.getpid())]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _thread_cpu() -> dict[str, tuple[str, float]]:
    """CPU seconds of every thread of the processes of interest, keyed by /proc path."""
    hz = os.sysconf("SC_CLK_TCK")
    out: dict[str, tuple[str, float]] = {}
    ours = _descendants()
    for task in glob.glob("/proc/[0-9]*/task/[0-9]*"):
        pid, tid = task.split("/")[2], task.split("/")[4]
        if pid not in ours:
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"{task}/stat").read_text()
        except OSError:
            continue
        if b"java" in cmd:
            kind = "jvm"
        elif b"kaflite.cli" in cmd:
            kind = "broker"
        elif b"pyspark.worker" in cmd and b"sql.worker" not in cmd:
            kind = "worker main" if pid == tid else "worker other threads"
        elif b"pyspark" in cmd:
            kind = "planner"
        else:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[task] = (kind, (int(fields[11]) + int(fields[12])) / hz)
    return out


def _cpu_delta(before: dict[str, tuple[str, float]],
               after: dict[str, tuple[str, float]]) -> dict[str, float]:
    used: dict[str, float] = {}
    for task, (kind, t) in after.items():
        used[kind] = used.get(kind, 0.0) + t - before.get(task, (kind, 0.0))[1]
    return used


# -- the two baselines, as Python data sources ----------------------------------------------
def _sources(records: int, size: int, partitions: int) -> tuple[type, type]:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kaflite.spark.schema import SCHEMA, spark_ddl

    class MemoryReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(p) for p in range(partitions)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import array

            import pyarrow as pa

            n = records // partitions + (1 if partition.value < records % partitions else 0)
            b = 32_768
            payload = os.urandom(size)
            values = pa.array([payload] * b, pa.binary())
            keys = pa.nulls(b, pa.binary())
            topic = pa.array([TOPIC] * b, pa.string())
            part = pa.array([partition.value] * b, pa.int32())
            ts = pa.array([int(time.time() * 1e6)] * b, pa.int64()).view(SCHEMA.field(
                "timestamp").type)
            types = pa.array([0] * b, pa.int32())
            for start in range(0, n, b):
                k = min(b, n - start)
                offsets = pa.Array.from_buffers(pa.int64(), k, [None, pa.py_buffer(
                    array.array("q", range(start, start + k)))])
                yield pa.RecordBatch.from_arrays(
                    [keys[:k], values[:k], topic[:k], part[:k], offsets, ts[:k], types[:k]],
                    schema=SCHEMA)

    class MemorySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_memory"

        def schema(self) -> str:
            return spark_ddl(False)

        def reader(self, schema: Any) -> MemoryReader:
            return MemoryReader()

    class ConfluentReader(DataSourceReader):
        def __init__(self, bootstrap: str) -> None:
            self.bootstrap = bootstrap

        def partitions(self) -> list[InputPartition]:
            from confluent_kafka import Consumer, TopicPartition

            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench"})
            out = []
            for p in range(partitions):
                lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
                out.append(InputPartition((p, lo, hi)))
            c.close()
            return out

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa
            from confluent_kafka import Consumer, TopicPartition

            p, lo, hi = partition.value
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "bench",
                          "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                          "max.partition.fetch.bytes": 8_388_608})
            c.assign([TopicPartition(TOPIC, p, lo)])
            pos = lo
            try:
                while pos < hi:
                    # Ask for no more than the range holds, or consume() waits out its timeout.
                    msgs = c.consume(min(32_768, hi - pos), timeout=5)
                    msgs = [m for m in msgs if m.error() is None and m.offset() < hi]
                    if not msgs:
                        continue
                    n = len(msgs)
                    pos = msgs[-1].offset() + 1
                    yield pa.RecordBatch.from_arrays([
                        pa.array([m.key() for m in msgs], pa.binary()),
                        pa.array([m.value() for m in msgs], pa.binary()),
                        pa.array([TOPIC] * n, pa.string()),
                        pa.array([p] * n, pa.int32()),
                        pa.array([m.offset() for m in msgs], pa.int64()),
                        pa.array([m.timestamp()[1] * 1000 for m in msgs], pa.int64())
                        .view(SCHEMA.field("timestamp").type),
                        pa.array([m.timestamp()[0] - 1 for m in msgs], pa.int32()),
                    ], schema=SCHEMA)
            finally:
                c.close()

    class ConfluentSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_confluent"

        def schema(self) -> str:
            return spark_ddl(False)

        def reader(self, schema: Any) -> ConfluentReader:
            return ConfluentReader(self.options["bootstrap"])

    return MemorySource, ConfluentSource


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--confluent-repeat", type=int, default=2,
                    help="rounds of the confluent-kafka source, run after the others")
    ap.add_argument("--write-records", type=int, default=None,
                    help="rows per write (default: --records)")
    ap.add_argument("--write-repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=ALL,
                    default=["memory", "kaflite", "kafka", "confluent-kafka", "write-kaflite",
                             "write-kafka"])
    ap.add_argument("--cpu", action="store_true",
                    help="also report CPU seconds per thread kind (Linux /proc), mean per read")
    args = ap.parse_args()
    write_records = args.write_records or args.records

    from pyspark.sql import SparkSession

    import kaflite.spark
    from kaflite.spark._session import LOOPBACK_DRIVER

    jars = spark_kafka_jars() if {"kafka", "write-kafka"} & set(args.only) else None
    if jars is None:
        args.only = [n for n in args.only if n not in ("kafka", "write-kafka")]
    with kaflite_broker() as bootstrap:
        if set(args.only) & set(READS):
            fill_topic(bootstrap, args.records, args.size, args.partitions)
        builder = (SparkSession.builder.master("local[2]").appName("kaflite-spark-bench")
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.ui.showConsoleProgress", "false"))
        for key, value in LOOPBACK_DRIVER.items():
            builder = builder.config(key, value)
        if jars is not None:   # local files: nothing is resolved at run time
            builder = builder.config("spark.jars", jars)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        kaflite.spark.register(spark)
        memory, confluent = _sources(args.records, args.size, args.partitions)
        spark.dataSource.register(memory)
        spark.dataSource.register(confluent)
        readers = {
            "memory": lambda: spark.read.format("bench_memory").load(),
            "kaflite": lambda: (spark.read.format("kaflite")
                                .option("kafka.bootstrap.servers", bootstrap)
                                .option("subscribe", TOPIC).load()),
            "kafka": lambda: (spark.read.format("kafka")
                              .option("kafka.bootstrap.servers", bootstrap)
                              .option("subscribe", TOPIC).load()),
            "confluent-kafka": lambda: (spark.read.format("bench_confluent")
                                        .option("bootstrap", bootstrap).load()),
        }
        for name in ("kaflite", "kafka"):   # every record, exactly once (not timed)
            if name in args.only:
                n = readers[name]().count()
                assert n == args.records, f"{name} read {n:,} records, not {args.records:,}"
        # Round-robin: every round reads with memory and kaflite in turn, so that a burst
        # of other work on the machine does not land on one source only. Round 0 warms up
        # the JVM and the Python workers and is not counted. The confluent-kafka source
        # runs its rounds afterwards: its long reads (millions of Python message objects
        # in the reused workers, garbage for the JVM) slowed the reads that followed them
        # by about 7% when it took part in the same rounds.
        times: dict[str, list[float]] = {name: [] for name in args.only}
        cpu: dict[str, list[dict[str, float]]] = {name: [] for name in args.only}
        main_sources = [n for n in args.only if n in READS and n != "confluent-kafka"]
        phases = [(main_sources, args.repeat)]
        if "confluent-kafka" in args.only:
            phases.append((["confluent-kafka"], args.confluent_repeat))
        writes = [n for n in args.only if n in WRITES]
        if writes:
            phases.append((writes, args.write_repeat))
        # The rows to write, made in the JVM: the same plan for both sinks.
        to_write = spark.range(0, write_records, 1, args.partitions).selectExpr(
            f"CAST(lpad(CAST(id AS STRING), {args.size}, 'x') AS BINARY) AS value")
        for names, repeat in phases:
            for i in range(repeat + 1):
                for name in names:
                    topic = f"{TOPIC}-{name}-{i}"
                    if name in WRITES:
                        create_topic(bootstrap, topic, args.partitions)
                    before = _thread_cpu() if args.cpu else {}
                    t = time.perf_counter()
                    if name in WRITES:
                        (to_write.write.format(WRITES[name])
                         .option("kafka.bootstrap.servers", bootstrap)
                         .option("topic", topic).mode("append").save())
                    else:
                        readers[name]().write.format("noop").mode("overwrite").save()
                    dt = time.perf_counter() - t
                    rows = write_records if name in WRITES else args.records
                    if name in WRITES:   # every row written (not timed)
                        n = topic_records(bootstrap, topic, args.partitions)
                        assert n == rows, f"{name} wrote {n:,} records, not {rows:,}"
                        delete_topic(bootstrap, topic)
                    if i:
                        times[name].append(dt)
                        if args.cpu:
                            cpu[name].append(_cpu_delta(before, _thread_cpu()))
                    print(f"  round {i} {name:16s} {rows / dt:12,.0f} rows/s"
                          + ("  (warm-up)" if not i else ""), flush=True)
        best = {name: min(ts) for name, ts in times.items()}
        spark.stop()

    mb = args.records * args.size / 1e6
    read = [name for name in best if name in READS]
    if read:
        print(f"\n{args.records:,} records of {args.size} bytes, {args.partitions} partitions, "
              f"local[2], best of {args.repeat} (confluent-kafka: of {args.confluent_repeat})")

    def per_round(slow: str, fast: str, what: str) -> None:
        """The ratio of two columns' times in each round (>1: ``slow`` took longer)."""
        if slow in times and fast in times:
            ratios = sorted(a / b for a, b in zip(times[slow], times[fast], strict=True))
            print(f"{what} per round: " + ", ".join(f"{r:.2f}x" for r in ratios)
                  + f" (median {ratios[len(ratios) // 2]:.2f}x)")

    per_round("kaflite", "memory", "kaflite time / memory time")
    per_round("kaflite", "kafka", "kaflite time / kafka time (kafka's rows/s / kaflite's)")
    if read:
        print(f"{'source':18s}{'rows/s':>14s}{'MB/s':>10s}{'seconds':>10s}{'vs memory':>12s}")
    for name in read:
        dt = best[name]
        ratio = f"{best[name] / best['memory']:.2f}x" if "memory" in best else "-"
        print(f"{name:18s}{args.records / dt:14,.0f}{mb / dt:10.1f}{dt:10.2f}{ratio:>12s}")
    if "kaflite" in best and "kafka" in best:
        print(f"reads: Spark's kafka format is {best['kaflite'] / best['kafka']:.2f}x the speed "
              "of the kaflite format (best against best)")
    written = [name for name in best if name in WRITES]
    if written:
        wmb = write_records * args.size / 1e6
        print(f"\nwrites: {write_records:,} rows of {args.size} bytes to a fresh topic of "
              f"{args.partitions} partitions, best of {args.write_repeat}")
        per_round("write-kaflite", "write-kafka",
                  "kaflite time / kafka time (kafka's rows/s / kaflite's)")
        print(f"{'sink':18s}{'rows/s':>14s}{'MB/s':>10s}{'seconds':>10s}")
        for name in written:
            dt = best[name]
            print(f"{name:18s}{write_records / dt:14,.0f}{wmb / dt:10.1f}{dt:10.2f}")
        if "write-kaflite" in best and "write-kafka" in best:
            print(f"writes: Spark's kafka format is "
                  f"{best['write-kaflite'] / best['write-kafka']:.2f}x the speed of the "
                  "kaflite format (best against best)")
    if args.cpu:
        print("CPU seconds per read (mean over the rounds):")
        for name, rounds in cpu.items():
            kinds = sorted({k for r in rounds for k in r})
            print(f"  {name:16s} " + ", ".join(
                f"{k} {sum(r.get(k, 0.0) for r in rounds) / len(rounds):.3f}" for k in kinds))
    if "kaflite" in best and "confluent-kafka" in best:
        print(f"kaflite is {best['confluent-kafka'] / best['kaflite']:.2f}x the speed of the "
              "confluent-kafka source")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
