"""How long each cluster under test takes to start, to lose a leader, to restart a broker
and to stop: the fixed costs of the interop suite (``make interop``).

Not a test. For each target (``kaflite-1``, ``kaflite-3``, ``kafka-1``, ``kafka-3``),
``--rounds`` times: start it (until every broker is listed by every broker), create a
one-partition topic with three replicas where there are three brokers, SIGKILL its
leader (``kill``) and time how long until kaflite's idempotent acks=all producer is
acknowledged again, ``restart`` that broker, then stop the cluster. Prints each round
and the medians. Apache Kafka's jars come from ``tools/ensure_kafka.sh``.

Usage: python benchmarks/peer_startup.py [--targets kaflite-1,kafka-1,kafka-3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kaflite.client import Admin, NewTopic, Producer  # noqa: E402
from kaflite.testing import ApacheKafka, ClusterUnderTest, KafliteCluster  # noqa: E402


def kafka_libs() -> Path:
    out = subprocess.run(["bash", str(ROOT / "tools" / "ensure_kafka.sh")], check=True,
                         capture_output=True, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def make(kind: str) -> ClusterUnderTest:
    name, _, count = kind.partition("-")
    if name == "kaflite":
        return KafliteCluster(brokers=int(count))
    return ApacheKafka(kafka_libs(), brokers=int(count))


async def leader_of(servers: str, topic: str, replicas: int) -> int:
    async with Admin(bootstrap_servers=servers) as admin:
        await admin.create_topics([NewTopic(topic, 1, replicas)])
        for _ in range(200):
            try:
                leader = (await admin.describe_topics([topic]))[topic].partitions[0].leader
            except Exception:   # the brokers learn of the topic after the controller
                leader = -1
            if leader >= 0:
                return leader
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{topic} got no leader")


async def failover_s(target: ClusterUnderTest, topic: str, leader: int) -> float:
    """Seconds from the leader's SIGKILL to the next acknowledged acks=all record."""
    async with Producer(bootstrap_servers=target.bootstrap_servers, acks="all",
                        enable_idempotence=True) as p:
        await p.send(topic, b"before", partition=0)
        await asyncio.to_thread(target.kill, leader)
        killed = time.monotonic()
        await p.send(topic, b"after", partition=0)
        return time.monotonic() - killed


def one_round(kind: str) -> dict[str, float]:
    target = make(kind)
    out: dict[str, float] = {}
    began = time.monotonic()
    target.start()
    try:
        out["start"] = time.monotonic() - began
        if len(target.node_ids) >= 3:
            topic = f"bench-{time.monotonic_ns()}"
            leader = asyncio.run(leader_of(target.bootstrap_servers, topic, 3))
            out["failover"] = asyncio.run(failover_s(target, topic, leader))
            began = time.monotonic()
            target.restart(leader)
            out["restart"] = time.monotonic() - began
    finally:
        began = time.monotonic()
        target.stop()
        out["stop"] = time.monotonic() - began
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="kaflite-1,kaflite-3,kafka-1,kafka-3")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for kind in args.targets.split(","):
        rounds = []
        for i in range(args.rounds):
            r = one_round(kind)
            rounds.append(r)
            print(f"{kind} round {i + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.items()),
                  flush=True)
        medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        print(f"{kind} median: " + ", ".join(f"{k} {v:.2f} s" for k, v in medians.items()),
              flush=True)


if __name__ == "__main__":
    main()
