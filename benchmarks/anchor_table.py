"""The measurements of ``benchmarks/kafka_anchor.py`` and the markdown it prints.

With ``--repeat`` above 1, every cell is the median over the rounds of that load on that
target (each round's own figures are printed as it ends).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from anchor_loads import LoadResult

__all__ = ["Measured", "Row", "client_ratios", "report", "rows", "summary", "table"]

BASE = "kafka"
PACED = ("java-producer-paced",)    # loads whose rate the load sets, not the target


@dataclass
class Measured:
    """One load's run on one target: what the load said, and the CPU it cost."""

    target: str
    load: str
    result: LoadResult
    size: int
    broker_cpu_s: float
    client_cpu_s: float
    wall_s: float
    loadavg: float      # the machine's 1-minute load average as the load ended

    @property
    def mb(self) -> float:
        return self.result.records * self.size / 1e6

    @property
    def rate(self) -> float:
        return self.result.records / self.result.seconds

    @property
    def mb_s(self) -> float:
        return self.mb / self.result.seconds

    @property
    def broker_cpu_per_mb(self) -> float:
        return self.broker_cpu_s / self.mb

    @property
    def client_cpu_per_mb(self) -> float:
        return self.client_cpu_s / self.mb


def report(m: Measured, round_: int) -> str:
    """One line per load as it ends."""
    lat = m.result.latency_ms
    lats = (f"  p50 {lat['p50']:.0f} ms  p99 {lat['p99']:.0f} ms  max {lat['max']:.0f} ms"
            if lat else "")
    return (f"[{m.target} #{round_}] {m.load:17} {m.rate:10,.0f} rec/s {m.mb_s:7.1f} MB/s"
            f"{lats}  broker {m.broker_cpu_per_mb:.4f} CPU-s/MB  client "
            f"{m.client_cpu_per_mb:.4f} CPU-s/MB  ({m.wall_s:.1f} s, load {m.loadavg:.1f})"
            f"{'  ' + m.result.note if m.result.note else ''}")


@dataclass
class Row:
    """The median over the rounds of one load on one target."""

    rounds: int
    rate: float
    mb_s: float
    p50: float | None
    p99: float | None
    broker_cpu_per_mb: float
    client_cpu_per_mb: float


def rows(results: list[Measured]) -> dict[tuple[str, str], Row]:
    """(load, target) -> its median row."""
    groups: dict[tuple[str, str], list[Measured]] = {}
    for m in results:
        groups.setdefault((m.load, m.target), []).append(m)

    def med(ms: list[Measured], f: Callable[[Measured], float | None]) -> float | None:
        values = [v for m in ms if (v := f(m)) is not None]
        return statistics.median(values) if values else None

    out = {}
    for key, ms in groups.items():
        out[key] = Row(len(ms), statistics.median(m.rate for m in ms),
                       statistics.median(m.mb_s for m in ms),
                       med(ms, lambda m: m.result.latency_ms.get("p50")),
                       med(ms, lambda m: m.result.latency_ms.get("p99")),
                       statistics.median(m.broker_cpu_per_mb for m in ms),
                       statistics.median(m.client_cpu_per_mb for m in ms))
    return out


def _ms(v: float | None) -> str:
    return f"{v:,.0f}" if v is not None else ""


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else ""


def table(results: list[Measured], loads: Sequence[str], targets: Sequence[str]) -> str:
    by = rows(results)
    lines = ["| load | target | records/s | MB/s | p50 ms | p99 ms | broker CPU-s/MB "
             "| client CPU-s/MB | records/s vs Kafka | broker CPU-s/MB vs Kafka |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for load in loads:
        base = by.get((load, BASE))
        for target in targets:
            r = by.get((load, target))
            if r is None:
                continue
            vs = vs_cpu = ""
            if base is not None and target != BASE:
                vs = _ratio(r.rate, base.rate)
                vs_cpu = _ratio(r.broker_cpu_per_mb, base.broker_cpu_per_mb)
            lines.append(f"| {load} | {target} | {r.rate:,.0f} | {r.mb_s:.1f} | {_ms(r.p50)} "
                         f"| {_ms(r.p99)} | {r.broker_cpu_per_mb:.4f} | "
                         f"{r.client_cpu_per_mb:.4f} | {vs} | {vs_cpu} |")
    return "\n".join(lines)


def client_ratios(results: list[Measured]) -> str:
    """kaflite's client (and librdkafka) over the Java client, all against Kafka."""
    by = rows(results)
    lines = []
    for kind, java_load in (("producer", "java-producer"), ("producer", "java-producer-1m"),
                            ("consumer", "java-consumer")):
        java = by.get((java_load, BASE))
        if java is None:
            continue
        for client in ("kaflite", "rdkafka"):
            r = by.get((f"{client}-{kind}", BASE))
            if r is None:
                continue
            parts = [f"records/s {_ratio(r.rate, java.rate)}"]
            if r.p50 is not None:
                parts += [f"p50 {_ratio(r.p50, java.p50)}", f"p99 {_ratio(r.p99, java.p99)}"]
            parts.append(f"client CPU-s/MB {_ratio(r.client_cpu_per_mb, java.client_cpu_per_mb)}")
            lines.append(f"- {client}-{kind} / {java_load}, both against Apache Kafka: "
                         + ", ".join(parts))
    return "\n".join(lines)


def summary(results: list[Measured], targets: Sequence[str]) -> str:
    """Per target, the geometric means over the loads of its ratios to Kafka's."""
    by = rows(results)
    lines = []
    for target in targets:
        if target == BASE:
            continue
        pairs = [(r, by[(load, BASE)]) for (load, t), r in by.items()
                 if t == target and (load, BASE) in by]
        if not pairs:
            continue
        # a paced load's rate is set by the load, not by the target
        rates = [r.rate / by[(load, BASE)].rate for (load, t), r in by.items()
                 if t == target and (load, BASE) in by and load not in PACED]
        cpu = [r.broker_cpu_per_mb / b.broker_cpu_per_mb for r, b in pairs
               if b.broker_cpu_per_mb > 0 and r.broker_cpu_per_mb > 0]
        parts = ([f"records/s {statistics.geometric_mean(rates):.2f}x over {len(rates)} "
                  "unpaced loads"] if rates else [])
        if cpu:
            parts.append(f"broker CPU-s per MB {statistics.geometric_mean(cpu):.2f}x over "
                         f"{len(cpu)} loads")
        lines.append(f"- {target} / kafka (geometric means): " + ", ".join(parts))
    return "\n".join(lines)
