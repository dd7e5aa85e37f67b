"""Spark batch read throughput: the kaflite source beside two baselines, in one run.

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
* **confluent-kafka**: a Python data source whose tasks read the same offset
  ranges with confluent-kafka's ``Consumer.consume`` (librdkafka) and build
  the same Arrow batches from the messages.

The reads run in ``--repeat`` rounds after a warm-up round, each round reading
once with the memory and the kaflite source in turn; the confluent-kafka
source then runs its own ``--confluent-repeat`` rounds (its 18-second reads
would otherwise disturb the reads that follow them). The table shows each
source's best run in rows/s and MB/s (value bytes), and the ratios; the
kaflite/memory ratio of every round is printed too. This is a benchmark, not
a test: the numbers move with whatever else runs on the machine.
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


def fill_topic(bootstrap: str, records: int, size: int, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
    time.sleep(0.5)
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
def _thread_cpu() -> dict[str, tuple[str, float]]:
    """CPU seconds of every thread of the processes of interest, keyed by /proc path."""
    hz = os.sysconf("SC_CLK_TCK")
    out: dict[str, tuple[str, float]] = {}
    for task in glob.glob("/proc/[0-9]*/task/[0-9]*"):
        pid, tid = task.split("/")[2], task.split("/")[4]
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
    ap.add_argument("--only", nargs="*", default=["memory", "kaflite", "confluent-kafka"])
    ap.add_argument("--cpu", action="store_true",
                    help="also report CPU seconds per thread kind (Linux /proc), mean per read")
    args = ap.parse_args()

    from pyspark.sql import SparkSession

    import kaflite.spark

    with kaflite_broker() as bootstrap:
        fill_topic(bootstrap, args.records, args.size, args.partitions)
        spark = (SparkSession.builder.master("local[2]").appName("kaflite-spark-bench")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.ui.showConsoleProgress", "false")
                 .getOrCreate())
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
            "confluent-kafka": lambda: (spark.read.format("bench_confluent")
                                        .option("bootstrap", bootstrap).load()),
        }
        if "kaflite" in args.only:   # every record, exactly once (not timed)
            df = readers["kaflite"]()
            n = df.count()
            assert n == args.records, f"kaflite read {n:,} records, not {args.records:,}"
        # Round-robin: every round reads with memory and kaflite in turn, so that a burst
        # of other work on the machine does not land on one source only. Round 0 warms up
        # the JVM and the Python workers and is not counted. The confluent-kafka source
        # runs its rounds afterwards: its long reads (millions of Python message objects
        # in the reused workers, garbage for the JVM) slowed the reads that followed them
        # by about 7% when it took part in the same rounds.
        times: dict[str, list[float]] = {name: [] for name in args.only}
        cpu: dict[str, list[dict[str, float]]] = {name: [] for name in args.only}
        main_sources = [n for n in args.only if n != "confluent-kafka"]
        phases = [(main_sources, args.repeat)]
        if "confluent-kafka" in args.only:
            phases.append((["confluent-kafka"], args.confluent_repeat))
        for names, repeat in phases:
            for i in range(repeat + 1):
                for name in names:
                    before = _thread_cpu() if args.cpu else {}
                    t = time.perf_counter()
                    readers[name]().write.format("noop").mode("overwrite").save()
                    dt = time.perf_counter() - t
                    if i:
                        times[name].append(dt)
                        if args.cpu:
                            cpu[name].append(_cpu_delta(before, _thread_cpu()))
                    print(f"  round {i} {name:16s} {args.records / dt:12,.0f} rows/s"
                          + ("  (warm-up)" if not i else ""), flush=True)
        best = {name: min(ts) for name, ts in times.items()}
        spark.stop()

    mb = args.records * args.size / 1e6
    print(f"\n{args.records:,} records of {args.size} bytes, {args.partitions} partitions, "
          f"local[2], best of {args.repeat} (confluent-kafka: of {args.confluent_repeat})")
    if "memory" in times and "kaflite" in times:
        per_round = sorted(k / m for k, m in zip(times["kaflite"], times["memory"],
                                                 strict=True))
        print("kaflite / memory per round: " + ", ".join(f"{r:.2f}x" for r in per_round)
              + f" (median {per_round[len(per_round) // 2]:.2f}x)")
    print(f"{'source':18s}{'rows/s':>14s}{'MB/s':>10s}{'seconds':>10s}{'vs memory':>12s}")
    for name, dt in best.items():
        ratio = best[name] / best["memory"] if "memory" in best else float("nan")
        print(f"{name:18s}{args.records / dt:14,.0f}{mb / dt:10.1f}{dt:10.2f}"
              f"{ratio:11.2f}x")
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
