"""The cluster process of a verify run: ``python -m kaflite.verify._server``.

An embedded ``Cluster`` on fixed loopback ports with its HTTP API (the fault
hooks of ``kaflite.cluster.http``), so that the run can SIGKILL the whole process
and start it again on the same ports and data directory. With ``--processes``
each broker is a process of its own (``Cluster(processes=True)``): the nemesis's
``kill`` SIGKILLs that process, and ``crash`` SIGKILLs the controller process,
whose brokers exit when their connection to it ends. It prints one JSON line
(``{"ready": ...}``) once every broker listens, and stops gracefully when its
standard input closes: a parent that dies takes its cluster with it. The members
the coordinators removed go to ``group-removals.jsonl`` in the data directory
(``kaflite.cluster.groups.removals``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
from pathlib import Path

from kaflite._loop import run
from kaflite.cluster import Cluster, gc_policy
from kaflite.cluster.groups.removals import ENV as removals_env
from kaflite.cluster.groups.removals import install_sink
from kaflite.cluster.http import HttpApi
from kaflite.verify.control import REMOVALS_FILE


async def serve(args: argparse.Namespace) -> None:
    gc_policy.install()     # the cluster's process (kaflite.cluster.gc_policy)
    props = dict(item.split("=", 1) for item in args.config)
    # every member a coordinator removes, for the checker (broker processes inherit ENV)
    removals = Path(args.data_dir) / REMOVALS_FILE
    os.environ[removals_env] = str(removals)
    install_sink(removals)
    cluster = Cluster(brokers=args.brokers, data_dir=Path(args.data_dir), host="127.0.0.1",
                      base_port=args.base_port, config=props, processes=args.processes)
    await cluster.start()
    api = await HttpApi(cluster, "127.0.0.1", args.http_port, token=args.token,
                        sampling=False).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def watch_stdin() -> None:
        sys.stdin.read()        # returns at EOF: the parent closed the pipe or died
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()
    print(json.dumps({"ready": True, "bootstrap": cluster.bootstrap_servers,
                      "http": api.url, "cluster_id": cluster.cluster_id}), flush=True)
    await stop.wait()
    await api.stop()
    await cluster.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kaflite.verify._server")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--base-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--token", help="the console token state changes need "
                        "(default: a random one)")
    parser.add_argument("--processes", action="store_true",
                        help="each broker in its own OS process")
    run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
