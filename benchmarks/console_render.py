"""How fast the console page renders a big cluster, and what the console costs the brokers.

Not a test. Starts a 3-broker kaflite cluster with ``--partitions`` partitions (over
``--topics`` topics, replication factor 1) and at least ``--connections`` real client
connections (kaflite producers, each writing to a partition on every broker: a bootstrap
connection and one per leader), serves its console on loopback, and opens the page in
Debian's chromium with Playwright:

* **cold**: a fresh tab loads the page at ``#cluster`` (or ``#connections``) and the time
  is the page's own clock (``performance.now()``, from the navigation's start) at the
  moment the panel shows every partition (every connection);
* **switch**: on a loaded page, from another panel to this one, until the same moment;
* **update**: one live refresh of the panel's table with fresh data (the diff pass).

Then, with ``--produce N``, the produce throughput of a kaflite producer (N records of
100 bytes to a 6-partition topic, in rounds) without the console, and with it serving a
page open on the cluster panel (its samplers running): the console's cost to the brokers::

    .venv/bin/python benchmarks/console_render.py --partitions 2000 --connections 200
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kaflite.client.sync import Producer
from kaflite.cluster import Cluster
from kaflite.console import ConsoleServer, EmbeddedBackend

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients import create_topic, kaflite_send_batch

CHROMIUM = "/usr/bin/chromium"

# JS: resolve with performance.now() once the panel shows `want` rows in its table.
WAIT_ROWS = """([table, want]) => new Promise((resolve) => {
  const done = () => {
    const t = document.querySelector(`.vtable[data-table="${table}"]`);
    const ready = document.querySelector('#panel[data-ready="1"]');
    const rows = t && t.parentElement.querySelector(".vt-count");
    const n = rows ? parseInt(rows.textContent, 10) : 0;
    if (ready && n >= want) resolve(performance.now());
    else requestAnimationFrame(done);
  };
  done();
})"""

SWITCH = ("""async ([panel, table, want]) => {
  const t0 = performance.now();
  location.hash = "#" + panel;
  const t1 = await (WAIT)([table, want]);
  return t1 - t0;
}""").replace("WAIT", WAIT_ROWS)

# One live update: the table gets a fresh copy of its rows and redraws (a forced layout).
UPDATE = """(table) => {
  const root = document.querySelector(`.vtable[data-table="${table}"]`);
  const vt = root.__vtable;
  const t0 = performance.now();
  vt.setRows(vt.rows.map((r) => ({ ...r })));
  vt.render();
  void root.offsetHeight;
  return performance.now() - t0;
}"""


def make_connections(cluster: Cluster, want: int) -> list[Producer[bytes, bytes]]:
    """kaflite producers until the registry counts ``want`` client connections."""
    topic = "bench-connections"
    cluster.create_topic(topic, 3, 1, assignments=[[0], [1], [2]])
    producers: list[Producer[bytes, bytes]] = []
    deadline = time.monotonic() + 120
    while len(cluster.connections()) < want and time.monotonic() < deadline:
        p = Producer[bytes, bytes](bootstrap_servers=cluster.bootstrap_servers,
                                   client_id=f"bench-client-{len(producers)}").start()
        for partition in range(3):
            p.send(topic, b"x", partition=partition)
        producers.append(p)
    return producers


def measure_page(url: str, partitions: int, connections: int, repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {}
    targets = {"cluster": ("partitions", partitions), "connections": ("connections", connections)}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for panel, (table, want) in targets.items():
                for _ in range(repeat):
                    page = browser.new_page(viewport={"width": 1400, "height": 900})
                    page.goto(f"{url}#{panel}", wait_until="commit")
                    out.setdefault(f"{panel} cold", []).append(
                        page.evaluate(WAIT_ROWS, [table, want]))
                    page.evaluate("location.hash = '#log'")
                    page.wait_for_selector('#panel[data-panel="log"][data-ready="1"]')
                    out.setdefault(f"{panel} switch", []).append(
                        page.evaluate(SWITCH, [panel, table, want]))
                    out.setdefault(f"{panel} update", []).append(page.evaluate(UPDATE, table))
                    page.close()
        finally:
            browser.close()
    return out


def produce_rate(servers: str, records: int) -> float:
    """Records per second of one kaflite producer (in a thread of its own: Playwright's
    sync API keeps an event loop running in this one)."""
    rate: list[float] = []

    def run() -> None:
        topic = create_topic(servers, 6)
        t0 = time.perf_counter()
        kaflite_send_batch(servers, topic, b"v" * 100, records)
        rate.append(records / (time.perf_counter() - t0))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if not rate:
        raise RuntimeError("the producer failed")
    return rate[0]


MODES = ("no console", "console", "console + page")
IDLE_S = 5.0


def overhead(records: int, rounds: int) -> tuple[dict[str, tuple[list[float], list[float]]],
                                                 dict[str, list[float]]]:
    """Produce rates, and the CPU the cluster's loop thread spent per record, on one cluster
    without its console, serving it, and serving it to a page open on the cluster panel;
    and that thread's CPU per second of wall time over IDLE_S seconds with no traffic.
    The console runs on the cluster's own loop, so that thread's CPU counts its work too."""
    from playwright.sync_api import sync_playwright

    out: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in MODES}
    idle: dict[str, list[float]] = {m: [] for m in MODES}
    with Cluster(brokers=3) as cluster, sync_playwright() as pw:
        cpu = loop_thread_cpu(cluster)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])

        def run(mode: str) -> None:
            t0, before = time.perf_counter(), cpu()
            time.sleep(IDLE_S)
            idle[mode].append((cpu() - before) / (time.perf_counter() - t0) * 1e3)
            before = cpu()
            out[mode][0].append(produce_rate(cluster.bootstrap_servers, records))
            out[mode][1].append((cpu() - before) / records * 1e6)

        try:
            for _ in range(rounds):
                run("no console")
                server = cluster.call(_start(cluster))
                time.sleep(2)              # its samplers have started
                run("console")
                page = browser.new_page()
                page.goto(f"{server.console_url}#cluster")
                page.wait_for_selector('#panel[data-ready="1"]')
                run("console + page")
                page.close()
                cluster.call(server.stop())
        finally:
            browser.close()
    return out, idle


def loop_thread_cpu(cluster: Cluster) -> Callable[[], float]:
    """The CPU seconds of the thread running ``cluster``'s event loop (as authorizer.py)."""
    async def ident() -> int:
        return threading.get_ident()
    clock = time.pthread_getcpuclockid(cluster.call(ident()))
    return lambda: time.clock_gettime(clock)


async def _start(cluster: Cluster) -> ConsoleServer:
    return await ConsoleServer(EmbeddedBackend(cluster), "127.0.0.1", 0).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--produce", type=int, default=0, help="records per overhead round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    per_topic = args.partitions // args.topics
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 30000}) as cluster:
        for i in range(args.topics):
            cluster.create_topic(f"bench-topic-{i:03d}", per_topic, 1)
        producers = make_connections(cluster, args.connections)
        total = sum(len(t.partitions) for t in cluster.controller.topics.values()
                    if not t.internal)
        conns = len(cluster.connections())
        server = cluster.call(_start(cluster))
        try:
            print(f"{total} partitions in {args.topics + 1} topics, {conns} client connections "
                  f"(registry, console's own included), {len(producers)} producers")
            times = measure_page(server.console_url, total, args.connections, args.repeat)
        finally:
            cluster.call(server.stop())
            for p in producers:
                p.close()
    print(f"{'':22} {'median ms':>10} {'best ms':>9} {'worst ms':>9}")
    for name, values in times.items():
        print(f"{name:22} {statistics.median(values):10.1f} {min(values):9.1f} "
              f"{max(values):9.1f}")
    if args.produce:
        results, idle = overhead(args.produce, args.rounds)
        base_rate = statistics.median(results["no console"][0])
        base_cpu = statistics.median(results["no console"][1])
        print(f"{'produce, 100 B records':22} {'rec/s':>11} {'vs none':>8} "
              f"{'loop CPU us/rec':>16} {'vs none':>8} {'idle loop CPU ms/s':>19}")
        for mode, (rates, cpus) in results.items():
            rate, us = statistics.median(rates), statistics.median(cpus)
            print(f"{mode:22} {rate:11,.0f} {rate / base_rate:8.3f} {us:16.3f} "
                  f"{us / base_cpu:8.3f} {statistics.median(idle[mode]):19.1f}")

if __name__ == "__main__":
    main()
