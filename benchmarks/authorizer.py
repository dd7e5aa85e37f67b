"""The cost of the authorizer on the produce and fetch paths.

Not a test. Starts two one-broker kaflite clusters, one without an authorizer and
one with ``authorizer.class.name`` set and 100 ACLs present (the client's
principal, User:ANONYMOUS on PLAINTEXT, is allowed by a PREFIXED ``bench-`` topic
ACL among 99 others: literal, prefixed and wildcard bindings of other users,
resources and hosts). Then, in rounds (every run once per round), produces N
records to a fresh topic and reads them back with kaflite's client and with
confluent-kafka on each cluster, and prints msg/s (best and median) and the ratio
with / without. It also measures what the brokers themselves spend: the CPU time
of the thread that runs the clusters' event loop, per record, over the same
runs (the median of the rounds). That figure leaves out the clients and
whatever else runs on the machine, so it shows the authorizer's cost even where
the wall-clock rates are too noisy to::

    .venv/bin/python benchmarks/authorizer.py --records 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients import (
    confluent_consume,
    confluent_produce,
    create_topic,
    kaflite_consume,
    kaflite_send_batch,
    timed,
)

from kaflite.cluster import Cluster
from kaflite.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

RUNS = {"kaflite": (kaflite_send_batch, kaflite_consume),
        "confluent-kafka": (confluent_produce, confluent_consume)}
ME = "User:ANONYMOUS"


def acls(count: int = 100) -> list[AclBinding]:
    """The client's own grants, then other users' bindings up to ``count``."""
    rt, pt, op, perm = ResourceType, PatternType, AclOperation, AclPermissionType
    out = [AclBinding(rt.TOPIC, "bench-", pt.PREFIXED, ME, "*", op.ALL, perm.ALLOW),
           AclBinding(rt.CLUSTER, CLUSTER_NAME, pt.LITERAL, ME, "*", op.ALL, perm.ALLOW),
           # confluent-kafka's consumer has a group.id (assign mode): it looks the group up
           AclBinding(rt.GROUP, "*", pt.LITERAL, ME, "*", op.ALL, perm.ALLOW)]
    i = 0
    while len(out) < count:
        kind = i % 4
        name = f"team{i}-" if kind == 1 else "*" if kind == 3 else f"topic-{i}"
        out.append(AclBinding(rt.TOPIC if kind != 2 else rt.GROUP, name,
                              pt.PREFIXED if kind == 1 else pt.LITERAL, f"User:user{i}",
                              "*" if i % 2 else f"10.0.{i // 250}.{i % 250}",
                              [op.READ, op.WRITE, op.DESCRIBE][i % 3],
                              perm.DENY if i % 7 == 0 else perm.ALLOW))
        i += 1
    return out


def loop_thread_cpu(cluster: Cluster) -> Callable[[], float]:
    """A reading of the CPU seconds of the thread running ``cluster``'s event loop
    (its own CPU clock: nanoseconds, not the scheduler's ticks)."""
    async def ident() -> int:
        return threading.get_ident()
    clock = time.pthread_getcpuclockid(cluster.call(ident()))
    return lambda: time.clock_gettime(clock)


AUTHORIZER_FUNCS = {("_gate.py", "check"), ("_gate.py", "finish"), ("_gate.py", "fetch_denied")}


def profiled_share(cluster: Cluster, servers: str, value: bytes, n: int) -> str:
    """One round of each run on the authorizing cluster under cProfile (on its loop
    thread): the authorizer's part of the time the broker spends handling requests.
    Profiling slows everything alike, so the share is what counts, not the times."""
    profile = cProfile.Profile()

    async def switch(on: bool) -> None:
        profile.enable() if on else profile.disable()
    cluster.call(switch(True))
    try:
        for produce, consume in RUNS.values():
            topic = create_topic(servers)
            produce(servers, topic, value, n, {})
            consume(servers, topic, value, n, {})
    finally:
        cluster.call(switch(False))
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    handled = sum(ct for (f, _, name), (_, _, _, ct, _) in stats.items()
                  if f.endswith("network.py") and name == "_handle")
    gate = sum(ct for (f, _, name), (_, _, _, ct, _) in stats.items()
               if (Path(f).name, name) in AUTHORIZER_FUNCS)
    return (f"profiled: the authorizer (request gate, response rewrite, Fetch check) took "
            f"{gate:.3f} s of {handled:.3f} s of request handling = {gate / handled:.2%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with Cluster(brokers=1) as plain, \
            Cluster(brokers=1, config={"authorizer.class.name": "kaflite"}) as secured:
        secured.controller.acls.add(acls())
        clusters = {"without": plain.bootstrap_servers, "with": secured.bootstrap_servers}
        lines = [f"{len(secured.controller.acls)} ACLs on the authorizing broker"]
        cpu = {"without": loop_thread_cpu(plain), "with": loop_thread_cpu(secured)}
        for size in (100, 1024):
            n = args.records if size == 100 else max(args.records // 4, 1000)
            value = b"x" * size
            times: dict[tuple[str, str, str], list[float]] = {}
            broker_cpu: dict[tuple[str, str, str], list[float]] = {}
            for _ in range(max(args.repeat, 1)):
                for client, (produce, consume) in RUNS.items():
                    for which, servers in clusters.items():
                        topic = create_topic(servers)
                        for op, fn in (("produce", produce), ("fetch", consume)):
                            before = cpu[which]()
                            secs = timed(functools.partial(fn, servers, topic, value, n, {}))
                            times.setdefault((op, client, which), []).append(secs)
                            broker_cpu.setdefault((op, client, which), []).append(
                                (cpu[which]() - before) / n * 1e6)
            lines.append(f"\n{size}-byte records, {n} records, best of {args.repeat}\n")
            lines.append("| run | without msg/s | with authorizer msg/s (median) | with / "
                         "without |\n|---|---:|---:|---:|")
            for op in ("produce", "fetch"):
                for client in RUNS:
                    base = n / min(times[(op, client, "without")])
                    auth = times[(op, client, "with")]
                    best = n / min(auth)
                    lines.append(f"| {op} {client} | {base:,.0f} | {best:,.0f} "
                                 f"({n / statistics.median(auth):,.0f}) | {best / base:.2f} |")
            lines.append("\nbroker CPU per record (the loop thread, median of the rounds)\n")
            lines.append("| run | without µs | with authorizer µs | with / without |\n"
                         "|---|---:|---:|---:|")
            for op in ("produce", "fetch"):
                for client in RUNS:
                    off = statistics.median(broker_cpu[(op, client, "without")])
                    on = statistics.median(broker_cpu[(op, client, "with")])
                    ratio = on / off if off else float("nan")
                    lines.append(f"| {op} {client} | {off:.3f} | {on:.3f} | {ratio:.3f} |")
            lines.append("\n" + profiled_share(secured, clusters["with"], value, n))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
