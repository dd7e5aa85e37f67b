"""kaflite produce / consume / topics / groups / bench against an embedded cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kaflite.cli._format import compile_format
from kaflite.cluster import Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=2, config={"group.initial.rebalance.delay.ms": 0}) as c:
        yield c


def kaflite(*args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([sys.executable, "-m", "kaflite.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_topics_produce_consume_groups(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    kaflite("topics", "create", "cli-data", "-b", b, "-p", "3", "-r", "2")
    assert "cli-data" in kaflite("topics", "list", "-b", b).split()
    described = kaflite("topics", "describe", "cli-data", "-b", b).splitlines()
    assert described[0].startswith("Topic: cli-data\tTopicId: ")
    assert [line.split("\t")[2] for line in described[1:]] == [f"Partition: {p}"
                                                               for p in range(3)]
    lines = [f"key{i}:value-{i}" for i in range(300)]
    kaflite("produce", "-t", "cli-data", "-b", b, "-K", ":", "-H", "origin=cli",
            stdin="\n".join(lines) + "\n")
    out = kaflite("consume", "-t", "cli-data", "-b", b, "-e", "-f", "%k=%s|%h\\n")
    got = sorted(out.splitlines())
    assert got == sorted(f"key{i}=value-{i}|origin=cli" for i in range(300))
    # Per partition, offsets come back in order.
    rows = [line.split() for line in
            kaflite("consume", "-t", "cli-data", "-b", b, "-e", "-f", "%p %o\\n").splitlines()]
    for p in {r[0] for r in rows}:
        offsets = [int(o) for q, o in rows if q == p]
        assert offsets == list(range(len(offsets)))
    assert len(kaflite("consume", "-t", "cli-data", "-b", b, "-o", "-5", "-e").splitlines()) \
        == 15  # the last 5 of each of 3 partitions
    grouped = kaflite("consume", "-t", "cli-data", "-b", b, "-G", "cli-group", "-c", "300")
    assert len(grouped.splitlines()) == 300
    assert "cli-group" in kaflite("groups", "list", "-b", b)
    lag = kaflite("groups", "describe", "cli-group", "-b", b)
    assert "cli-data" in lag


def test_bench_reports_rates(cluster: Cluster) -> None:
    out = kaflite("bench", "-b", cluster.bootstrap_servers, "-n", "20000", "-s", "50")
    assert out.startswith("produce:") and "consume:" in out and "msg/s" in out


def test_format_tokens() -> None:
    class Rec:
        topic, partition, offset, timestamp = "t", 3, 42, 1000
        key, value, headers = b"k", b"v", [("h", b"1")]

    assert compile_format("%t/%p@%o %k=%s (%K,%S) %T %h%%\\t|")(Rec()) == \
        "t/3@42 k=v (1,1) 1000 h=1%\t|"
    with pytest.raises(ValueError, match="unknown format token"):
        compile_format("%q")


def test_transactions_list_and_describe(cluster: Cluster) -> None:
    from kaflite.client import sync as ksync

    b = cluster.bootstrap_servers
    cluster.create_topic("cli-txn", 1, 2)
    with ksync.Producer({"bootstrap.servers": b, "transactional.id": "cli-tid"}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("cli-txn", b"open", partition=0)
        listed = kaflite("transactions", "list", "-b", b, "--state", "Ongoing")
        assert "cli-tid" in listed and "Ongoing" in listed
        described = kaflite("transactions", "describe", "cli-tid", "-b", b).splitlines()
        assert described[1].split()[1] == "cli-tid" and described[1].split()[4] == "Ongoing"
        assert described[1].split()[-1] == "cli-txn-0"
        p.abort_transaction()
    assert "cli-tid" not in kaflite("transactions", "list", "-b", b, "--state", "Ongoing")


def test_produce_generates_clickstream_events(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    cluster.create_topic("cli-clicks", 1, 1)
    before = int(time.time() * 1000)
    kaflite("produce", "-t", "cli-clicks", "-b", b, "--generate", "clickstream", "-n", "120",
            "--span", "60", "--seed", "5")
    after = int(time.time() * 1000)
    rows = [line.split("\t", 1) for line in
            kaflite("consume", "-t", "cli-clicks", "-b", b, "-e", "-f", "%k\t%s\n").splitlines()]
    assert len(rows) == 120
    events = [json.loads(value) for _, value in rows]
    assert [key for key, _ in rows] == [e["user"] for e in events]     # keyed by user
    for e in events:
        assert list(e) == ["user", "page", "action", "amount", "ts"]
        assert e["action"] in ("view", "click", "purchase") and e["page"].startswith("/")
        assert (e["amount"] > 0) == (e["action"] == "purchase")
    stamps = [e["ts"] for e in events]
    assert stamps == sorted(stamps)                                   # in event-time order
    assert before - 60_000 <= stamps[0] and stamps[-1] <= after
    assert stamps[-1] - stamps[0] >= 59_000                           # spread over the span
    assert len({e["page"] for e in events}) > 1 and len({e["user"] for e in events}) > 1
    bad = subprocess.run([sys.executable, "-m", "kaflite.cli", "produce", "-t", "cli-clicks",
                          "-b", b, "--generate", "clickstream", "-K", ":"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--generate" in bad.stderr
