"""``python -m kaflite.verify``: one workload under a random nemesis, checked.

    python -m kaflite.verify --client confluent-kafka --workload queue \\
        --nemesis all --seconds 120 --seed 42
    python -m kaflite.verify --check history.jsonl      # check a saved history again

Exit status 0 when the history is valid, 1 when the checker found anomalies,
2 on bad arguments.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.console import Console

from kaflite.verify.checker import check
from kaflite.verify.clients import CLIENTS
from kaflite.verify.history import History
from kaflite.verify.nemesis import KINDS
from kaflite.verify.report import render, replay_command
from kaflite.verify.runner import WORKLOADS, ClientUnavailable, RunConfig, run


def nemesis_kinds(text: str) -> tuple[str, ...]:
    text = text.strip().lower()
    if text == "none":
        return ()
    if text == "all":
        return KINDS
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown nemesis kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    return kinds


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kaflite.verify", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--client", choices=sorted(CLIENTS), default="kaflite")
    p.add_argument("--workload", choices=WORKLOADS, default="queue")
    p.add_argument("--nemesis", type=nemesis_kinds, default=KINDS,
                   help=f"none, all, or a comma list of: {', '.join(KINDS)}")
    p.add_argument("--seconds", type=float, default=30.0, help="how long the nemesis runs")
    p.add_argument("--seed", type=int, default=None, help="replays a run (default: random)")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--consumers", type=int, default=2)
    p.add_argument("--rate", type=float, default=150.0,
                   help="values per second per producer")
    p.add_argument("--progress-bound", type=float, default=30.0,
                   help="seconds a group may take to reach the log end after the faults")
    p.add_argument("--history", type=Path, default=None,
                   help="write the history here (JSON lines)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="keep the cluster's data here (default: a removed temporary dir)")
    p.add_argument("--group-protocol", choices=("classic", "cooperative", "consumer", "share"),
                   default="classic",
                   help="the consumers' group.protocol (consumer: KIP-848; cooperative: "
                   "classic with the cooperative-sticky assignor, KIP-429; share: share "
                   "consumers in a share group, KIP-932)")
    p.add_argument("--churn", action="store_true",
                   help="consumers leave their group and join again at seeded moments")
    p.add_argument("--filler-partitions", type=int, default=0,
                   help="create this many idle partitions (RF 3) before the run")
    p.add_argument("--processes", action="store_true",
                   help="run each broker in its own OS process: the nemesis's kill is a "
                   "SIGKILL of that process, restarted from its data directory")
    p.add_argument("--target", choices=("kaflite", "kafka"), default="kaflite",
                   help="the cluster under test: kaflite's, or Apache Kafka's own broker "
                   "(three KRaft nodes; the nemesis can then kill, stop, crash and move "
                   "leaders, and leaves out the faults that need kaflite's hooks)")
    p.add_argument("--kafka-libs", type=Path, default=None, metavar="DIR",
                   help="Apache Kafka's jars, for --target kafka (tools/ensure_kafka.sh "
                   "prints the directory)")
    p.add_argument("--via-proxy", action="store_true",
                   help="with --target kafka: kaflite's proxy in front of Kafka injects the "
                   "traffic faults (errors, delay, throttle, drop) from the same rules as "
                   "kaflite's cluster takes; the clients bootstrap from the proxy")
    p.add_argument("--request-log", action="store_true",
                   help="kaflite's cluster keeps every request in __kaflite_requests, to be "
                   "read from the data directory (--data-dir) with `kaflite requests`")
    p.add_argument("--check", type=Path, default=None, metavar="HISTORY",
                   help="only check a saved history")
    p.add_argument("--client-logs", action="store_true",
                   help="log the client libraries' own messages (refused connections...; "
                   "KAFLITE_VERIFY_RDKAFKA_DEBUG=cgrp,fetch adds librdkafka's debug)")
    return p


def quiet_client_logs() -> None:
    """A run refuses connections on purpose: the libraries' warnings about it are noise."""
    for name in ("aiokafka", "kafka", "kaflite.client", "kaflite.verify.librdkafka"):
        logging.getLogger(name).addHandler(logging.NullHandler())


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    console = Console()
    if args.client_logs:
        logging.basicConfig(level=logging.DEBUG,
                            format="%(relativeCreated)9.0f %(name)s %(message)s")
    else:
        quiet_client_logs()
    if args.check is not None:
        result = check(History.load(args.check).ops, args.progress_bound)
        render(result, console)
        return 0 if result.valid else 1
    config = RunConfig(client=args.client, workload=args.workload, nemesis=args.nemesis,
                       seconds=args.seconds, partitions=args.partitions,
                       producers=args.producers, consumers=args.consumers, rate=args.rate,
                       progress_bound=args.progress_bound, data_dir=args.data_dir,
                       history=args.history, processes=args.processes,
                       group_protocol=args.group_protocol, churn=args.churn,
                       filler_partitions=args.filler_partitions, target=args.target,
                       kafka_libs=args.kafka_libs, via_proxy=args.via_proxy,
                       request_log=args.request_log)
    if args.seed is not None:
        config.seed = args.seed
    console.print(f"seed {config.seed}: {replay_command(config.meta())}", markup=False,
                  highlight=False)
    try:
        _, result = run(config, on_phase=lambda text: console.print(f"[dim]{text}[/]"))
    except (ValueError, ClientUnavailable) as exc:
        console.print(f"error: {exc}", markup=False)
        return 2
    render(result, console)
    return 0 if result.valid else 1


if __name__ == "__main__":
    sys.exit(main())
