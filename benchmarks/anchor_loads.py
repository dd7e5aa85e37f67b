"""The loads of ``benchmarks/kafka_anchor.py``: Kafka's perf tools, and the same load
written for librdkafka (confluent-kafka) and kaflite's sync client.

Every load runs as a process of its own, so that its CPU time is its own and a stuck
load can be killed at its timeout: the Java tools as ``java -cp '<libs>/*'
org.apache.kafka.tools.<Class>``, the Python ones as

    python benchmarks/anchor_loads.py LOAD BOOTSTRAP TOPIC RECORDS SIZE

which prints one JSON line (records, seconds, latency percentiles in ms).

What each producer measures is what ``kafka-producer-perf-test`` measures: the time
from the producer's first send to the end of its flush, and every record's latency from
its send to its acknowledgement (acks=all). The Python producers take that latency for
every 16th record (the callback is Python code; one per record would slow them), from
librdkafka's own ``Message.latency()`` or, for kaflite, the delivery callback on the
client's loop thread. The consumers subscribe with a fresh group, as
``kafka-consumer-perf-test`` does, and count from the subscribe (the group join
included) to the last record.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PYTHON_LOADS", "LoadResult", "java_consumer_args", "java_producer_args",
           "parse_java_consumer", "parse_java_producer"]

SAMPLE_EVERY = 16        # the Python producers time every 16th record
BUFFER_BYTES = 33_554_432   # Java's buffer.memory default, given to every producer
DEADLINE_S = 600.0       # a Python load gives up after this long (the caller's timeout
                         # kills it sooner)


@dataclass
class LoadResult:
    """One load's outcome. ``latency_ms`` holds p50/p95/p99/p99.9/avg/max where the load
    measures them (producers)."""

    records: int
    seconds: float
    latency_ms: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def to_json(self) -> str:
        return json.dumps({"records": self.records, "seconds": self.seconds,
                           "latency_ms": self.latency_ms, "note": self.note})

    @classmethod
    def from_json(cls, text: str) -> LoadResult:
        d = json.loads(text)
        return cls(int(d["records"]), float(d["seconds"]),
                   {k: float(v) for k, v in d["latency_ms"].items()}, str(d["note"]))


def percentiles(samples_s: list[float]) -> dict[str, float]:
    """p50, p95, p99, p99.9, avg and max in ms, nearest-rank (as Kafka's tool)."""
    if not samples_s:
        return {}
    ms = sorted(x * 1000 for x in samples_s)

    def at(q: float) -> float:
        return ms[min(len(ms) - 1, max(0, math.ceil(q * len(ms)) - 1))]

    return {"p50": at(0.5), "p95": at(0.95), "p99": at(0.99), "p99.9": at(0.999),
            "avg": sum(ms) / len(ms), "max": ms[-1], "samples": float(len(ms))}


# -- Kafka's tools ---------------------------------------------------------------------
def java_producer_args(bootstrap: str, topic: str, records: int, size: int,
                       batch_size: int | None = None, throughput: int = -1) -> list[str]:
    """kafka-producer-perf-test with acks=all and the Java producer's other defaults
    (batch.size 16384 unless given, linger.ms 5, idempotence on, buffer.memory 32 MiB),
    as fast as it goes or at ``throughput`` records per second."""
    props = ["acks=all", *([f"batch.size={batch_size}"] if batch_size else [])]
    return ["org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", bootstrap,
            "--topic", topic, "--num-records", str(records), "--record-size", str(size),
            "--throughput", str(throughput), "--command-property", *props]


def java_consumer_args(bootstrap: str, topic: str, records: int) -> list[str]:
    """kafka-consumer-perf-test: subscribes with a fresh group, reads ``records``."""
    return ["org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap,
            "--topic", topic, "--num-records", str(records), "--group",
            f"anchor-{uuid.uuid4().hex[:8]}", "--timeout", "30000"]


# "200000 records sent, 51234.5 records/sec (50.03 MB/sec), 312.45 ms avg latency,
#  850.00 ms max latency, 301 ms 50th, 600 ms 95th, 800 ms 99th, 840 ms 99.9th."
_PRODUCER = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


def parse_java_producer(stdout: str) -> LoadResult:
    """The tool's final summary line (the progress lines before it lack the percentiles)."""
    found = _PRODUCER.findall(stdout)
    if not found:
        raise ValueError(f"no summary line in kafka-producer-perf-test's output:\n"
                         f"{stdout[-2000:]}")
    sent, rate, _mib_s, avg, mx, p50, p95, p99, p999 = found[-1]
    records = int(sent)
    return LoadResult(records, records / float(rate),
                      {"p50": float(p50), "p95": float(p95), "p99": float(p99),
                       "p99.9": float(p999), "avg": float(avg), "max": float(mx)})


def parse_java_consumer(stdout: str) -> LoadResult:
    """The header line (``start.time, end.time, data.consumed.in.MB, MB.sec,
    data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, ...``) and the line under it."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    for i, line in enumerate(lines[:-1]):
        if line.startswith("start.time"):
            row = dict(zip([h.strip() for h in line.split(",")],
                           [v.strip() for v in lines[i + 1].split(",")], strict=False))
            records = int(row["data.consumed.in.nMsg"])
            rate = float(row["nMsg.sec"])
            note = (f"group join {float(row['rebalance.time.ms']):.0f} ms, "
                    f"fetch-only {float(row['fetch.nMsg.sec']):,.0f} rec/s")
            return LoadResult(records, records / rate if rate else math.inf, note=note)
    raise ValueError(f"no result line in kafka-consumer-perf-test's output:\n{stdout[-2000:]}")


# -- librdkafka ------------------------------------------------------------------------
def rdkafka_producer(bootstrap: str, topic: str, records: int, size: int) -> LoadResult:
    from confluent_kafka import KafkaError, Message, Producer

    # acks=all and idempotence as Java's defaults; its 32 MiB of buffer (librdkafka's
    # default queue holds 1 GiB, and at full speed the latency is mostly that queue)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True,
                         "queue.buffering.max.kbytes": BUFFER_BYTES // 1024})
    payload = os.urandom(size)
    latencies: list[float] = []
    failed: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(str(err))
        elif (latency := msg.latency()) is not None:
            latencies.append(latency)

    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                produce(topic, payload, on_delivery=delivered if i % SAMPLE_EVERY == 0
                        else None)
                break
            except BufferError:     # the 32 MiB are in flight: wait for acknowledgements
                poll(0.005)
        if i % 256 == 0:
            poll(0)
    left = producer.flush(DEADLINE_S)
    seconds = time.perf_counter() - start
    if left or failed:
        raise RuntimeError(f"{left} records undelivered, {len(failed)} failed: {failed[:3]}")
    return LoadResult(records, seconds, percentiles(latencies))


def rdkafka_consumer(bootstrap: str, topic: str, records: int, size: int) -> LoadResult:
    from confluent_kafka import Consumer

    # fetch.queue.backoff.ms: librdkafka 2.4+ pauses fetching for 1 s (its default) when
    # its queue is full; benchmarks/broker.py found that pause to be most of a run
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"anchor-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10})
    got = nbytes = 0
    start = time.perf_counter()
    consumer.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S
    first = 0.0
    while got < records and time.monotonic() < deadline:
        # consume() waits for all 10,000 or the timeout: keep the wait at the tail short
        for m in consumer.consume(10_000, 0.05):
            if m.error() is None:
                got += 1
                nbytes += len(m.value() or b"")
        if got and not first:
            first = time.perf_counter() - start
    seconds = time.perf_counter() - start
    consumer.close()
    return _read(got, nbytes, records, size, seconds, first)


def _read(got: int, nbytes: int, records: int, size: int, seconds: float,
          first: float) -> LoadResult:
    """The consumers' result; ``first`` is when the first records came (the group join
    and the first fetch), as kafka-consumer-perf-test reports its join time."""
    if got < records:
        raise RuntimeError(f"read {got} of {records} records in {seconds:.0f} s")
    if nbytes != got * size:
        raise RuntimeError(f"read {nbytes} bytes in {got} records of {size}")
    rest = got / (seconds - first) if seconds > first else math.inf
    return LoadResult(got, seconds, note=f"first records after {first * 1000:.0f} ms, "
                      f"then {rest:,.0f} rec/s")


# -- kaflite's client ------------------------------------------------------------------
def kaflite_producer(bootstrap: str, topic: str, records: int, size: int) -> LoadResult:
    from kaflite.client.sync import Producer

    # kaflite's defaults are acks=all, idempotence on, buffer.memory 32 MiB (Java's),
    # linger.ms 5 and batch.size 1 MiB (librdkafka's 1,000,000, not Java's 16 KiB)
    payload = os.urandom(size)
    latencies: list[float] = []
    failed: list[str] = []

    def delivered(sent: float, err: BaseException | None, _meta: object) -> None:
        if err is not None:
            failed.append(repr(err))
        else:
            latencies.append(time.perf_counter() - sent)

    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
        # One record to each partition, untimed, before the load: it opens the connection
        # to every leader. (It first worked around a producer bug this benchmark found, a
        # Produce drained while its leader's connection was opening and then overtaken;
        # fixed in Sender._run; docs/benchmarks.md, "Apache Kafka as the anchor".)
        for partition in producer.partitions_for(topic) or []:
            producer.send(topic, payload, partition=partition)
        produce = producer.produce
        start = time.perf_counter()
        for i in range(records):
            if i % SAMPLE_EVERY == 0:
                produce(topic, payload,
                        on_delivery=functools.partial(delivered, time.perf_counter()))
            else:
                produce(topic, payload)
        producer.flush(DEADLINE_S)
        seconds = time.perf_counter() - start
        if failed:      # what the client did, for the report
            for event in producer.events():
                print(event, file=sys.stderr)
    if failed:
        raise RuntimeError(f"{len(failed)} sampled records failed: {failed[:3]}")
    return LoadResult(records, seconds, percentiles(latencies))


def kaflite_consumer(bootstrap: str, topic: str, records: int, size: int) -> LoadResult:
    from kaflite.client.sync import Consumer

    got = nbytes = 0
    with Consumer({"bootstrap.servers": bootstrap, "group.id": f"anchor-{uuid.uuid4().hex}",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False}) as consumer:
        start = time.perf_counter()
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        first = 0.0
        while got < records and time.monotonic() < deadline:
            for r in consumer.poll(timeout_ms=100):
                got += 1
                nbytes += len(r.value or b"")
            if got and not first:
                first = time.perf_counter() - start
        seconds = time.perf_counter() - start
    return _read(got, nbytes, records, size, seconds, first)


PYTHON_LOADS: dict[str, Callable[[str, str, int, int], LoadResult]] = {
    "rdkafka-producer": rdkafka_producer,
    "rdkafka-consumer": rdkafka_consumer,
    "kaflite-producer": kaflite_producer,
    "kaflite-consumer": kaflite_consumer,
}


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] not in PYTHON_LOADS:
        print(f"usage: anchor_loads.py {{{','.join(PYTHON_LOADS)}}} BOOTSTRAP TOPIC RECORDS "
              "SIZE", file=sys.stderr)
        return 2
    load, bootstrap, topic, records, size = argv
    result: Any = PYTHON_LOADS[load](bootstrap, topic, int(records), int(size))
    print(result.to_json(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
