"""The CLI's output home (tables or JSON) and its progress bars (a terminal's only)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from kaflite.cli import app
from kaflite.cli._output import Column, cell, emit, table_lines
from kaflite.cli._progress import bar, shows_progress
from kaflite.cluster import Cluster

runner = CliRunner()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1) as c:
        yield c


def test_tables_are_plain_and_json_has_the_same_values(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    rows = [{"group": "g", "lag": 0, "consumer_id": None, "replicas": [1, 2], "extra": True},
            {"group": "a-longer-group", "lag": 12, "consumer_id": "c-1", "replicas": [],
             "extra": False}]
    columns = [Column("group", "GROUP"), Column("lag", "LAG"),
               Column("consumer_id", "CONSUMER-ID"), Column("replicas", "REPLICAS")]
    lines = table_lines(rows, columns)
    assert [line.split() for line in lines] == [["GROUP", "LAG", "CONSUMER-ID", "REPLICAS"],
                                                ["g", "0", "-", "1,2"],
                                                ["a-longer-group", "12", "c-1"]]
    assert all(line == line.rstrip() for line in lines)
    assert "│" not in "".join(lines) and "─" not in "".join(lines)    # no box drawing
    # Columns line up: each header starts where its values start.
    at = lines[0].index("LAG")
    assert lines[1][at] == "0" and lines[2][at:at + 2] == "12"
    emit(rows, columns, as_json=True)
    assert json.loads(capsys.readouterr().out) == rows
    assert cell(None) == "-" and cell(True) == "true" and cell({"a": 1}) == "a=1"


def test_progress_is_shown_only_on_a_terminal() -> None:
    assert not shows_progress(io.StringIO())
    with bar("working", 10, io.StringIO()) as quiet:
        quiet.advance(5)
        assert not quiet.shown
    primary, secondary = os.openpty()
    try:
        with os.fdopen(os.dup(secondary), "w") as tty:
            assert shows_progress(tty)
            assert not shows_progress(tty, quiet_on=tty)     # consume to the screen
            assert shows_progress(tty, quiet_on=io.StringIO())
    finally:
        os.close(primary)
        os.close(secondary)


def run_with_tty_stderr(args: list[str], stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    """Run ``kaflite ARGS`` with stdout a pipe and stderr a terminal (a pty);
    return (exit code, stdout, what the terminal got)."""
    primary, secondary = os.openpty()
    screen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:          # the other end closed
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "kaflite.cli", *args], input=stdin,
                              stdout=subprocess.PIPE, stderr=secondary, timeout=120,
                              env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    finally:
        os.close(secondary)
        reader.join(10)
        os.close(primary)
    return proc.returncode, proc.stdout, bytes(screen)


def test_produce_and_consume_draw_a_bar_on_a_terminal_only(cluster: Cluster,
                                                           tmp_path: Path) -> None:
    b = cluster.bootstrap_servers
    cluster.create_topic("bars", 1, 1)
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"line-{i}\n" for i in range(3000)))
    code, out, screen = run_with_tty_stderr(["produce", "-t", "bars", "-b", b,
                                             "--file", str(lines), "--json"])
    assert code == 0, screen
    assert json.loads(out) == {"topic": "bars", "acknowledged": 3000}
    assert b"producing" in screen
    code, out, screen = run_with_tty_stderr(["consume", "-t", "bars", "-b", b, "-e"])
    assert code == 0, screen
    assert out.decode().splitlines() == [f"line-{i}" for i in range(3000)]  # nothing else
    assert b"consuming" in screen
    # With stderr a pipe (as here), there is no bar at all.
    piped = runner.invoke(app, ["produce", "-t", "bars", "-b", b], input="x\n")
    assert piped.exit_code == 0 and piped.stderr == "1 record written to bars, acknowledged\n"


def test_consume_json_is_one_object_a_record(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    cluster.create_topic("jsonl", 1, 1)
    result = runner.invoke(app, ["produce", "-t", "jsonl", "-b", b, "-K", ":", "-H", "h=1"],
                           input="k1:v1\nk2:v2\n")
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["consume", "-t", "jsonl", "-b", b, "-e", "--json"])
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(d["topic"], d["partition"], d["offset"], d["key"], d["value"], d["headers"])
            for d in docs] == [("jsonl", 0, 0, "k1", "v1", [["h", "1"]]),
                               ("jsonl", 0, 1, "k2", "v2", [["h", "1"]])]
    assert all(isinstance(d["timestamp"], int) for d in docs)


def test_bench_json_summary(cluster: Cluster) -> None:
    result = runner.invoke(app, ["bench", "-b", cluster.bootstrap_servers, "-n", "3000",
                                 "-s", "20", "-p", "2", "--json", "-X", "client.id=bench-x"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["records"], doc["consumed"], doc["size"], doc["partitions"]) == (3000, 3000,
                                                                                 20, 2)
    assert doc["produce"]["records_per_s"] > 0 and doc["consume"]["records_per_s"] > 0
    seen = {c.client_id for c in cluster.registry.connections(include_closed=True)}
    assert "bench-x" in seen


def test_connections_table_marks_closed_connections() -> None:
    """Issue 40: with --closed nothing said which connections were closed."""
    import time

    from rich.console import Console

    from kaflite.cli.connections import connections_table

    now = time.time()

    def row(client: str, closed_at: float | None) -> dict[str, object]:
        return {"client_id": client, "broker": 0, "peer": "127.0.0.1:5000", "roles": ["fetch"],
                "partitions": [], "groups": [], "transactional_ids": [], "apis": {},
                "last_activity": now - 3, "closed_at": closed_at}

    out = io.StringIO()
    Console(file=out, width=200).print(connections_table(
        [row("open-one", None), row("gone-one", now - 7)]))
    text = out.getvalue()
    assert "1 closed" in text
    (gone,) = [line for line in text.splitlines() if "gone-one" in line]
    (still,) = [line for line in text.splitlines() if "open-one" in line]
    assert "closed 7s ago" in gone and "closed" not in still


def _connection_rows(n: int) -> list[dict[str, object]]:
    import time

    now = time.time()
    long_id = "spark-source-1f0c9a2e-driver-0-executor-attempt-7-a-very-long-client-id"
    return [{"client_id": [f"consumer-{i}", long_id][i % 2], "broker": i % 3,
             "peer": f"127.0.0.1:{40000 + i}", "security_protocol": "SASL_SSL",
             "sasl_mechanism": "SCRAM-SHA-512", "principal": "User:alice",
             "roles": ["partition-leader", "group-coordinator"],
             "partitions": [f"events-{p}" for p in range(5)], "groups": ["demo-group"],
             "transactional_ids": [], "software_name": "kaflite", "software_version": "1.0",
             "apis": {"Fetch": {"count": 100 + i, "errors": {"NOT_LEADER_OR_FOLLOWER": 2}}},
             "last_activity": now - 2, "closed_at": now - 5 if i == 0 else None}
            for i in range(n)]


@pytest.mark.parametrize("width", [80, 100, 160])
def test_connections_fit_the_terminal_one_line_per_connection(width: int) -> None:
    """Issue 40: at 160 columns whatever the terminal, a client id wrapped over 5 lines in
    100 columns. Each connection now takes one line within the terminal's width: names
    are cut with an ellipsis, and what does not fit is hidden, as the caption says."""
    from rich.console import Console

    from kaflite.cli.connections import connections_table

    rows = _connection_rows(21)
    out = io.StringIO()
    Console(file=out, width=width).print(connections_table(rows, width))
    lines = out.getvalue().splitlines()
    assert max(cell_len(line) for line in lines) <= width
    body = [line for line in lines if "127.0.0" in line or " events-" in line]
    assert len(body) == 21, "\n".join(lines)        # one line per connection
    assert sum("spark-source-1" in line and "…" in line for line in body) == 10
    assert "closed 5s ago" in body[0] and not any("closed" in line for line in body[1:])
    caption = " ".join(" ".join(lines[-3:]).split())
    assert "1 closed" in caption
    if width < 160:
        assert "hidden to fit" in caption and "security" in caption
        assert "leader, coord" in body[1]            # the registry's role names, shortened
    # piped (no terminal: the widest table), nothing is cut or hidden
    wide = io.StringIO()
    Console(file=wide, width=1000).print(connections_table(rows))
    text = wide.getvalue()
    assert rows[1]["client_id"] in text and "User:alice" in text and "hidden" not in text
    assert "partition-leader, group-coordinator" in text


def test_clients_fit_the_terminal() -> None:
    from rich.console import Console

    from kaflite.cli.connections import clients_table

    rows = [{"client_id": "an-application-with-a-client-id-far-longer-than-a-screen" * 2,
             "host": "127.0.0.1", "connections": 4, "fan_out": {0: 2, 1: 1, 2: 1},
             "roles": {"partition-leader": 3, "group-coordinator": 1},
             "heartbeat_interval_ms": 3000.0, "commit_interval_ms": None, "fetch_rate": 2.5}]
    out = io.StringIO()
    Console(file=out, width=90).print(clients_table(rows, 90))
    lines = out.getvalue().splitlines()
    assert max(cell_len(line) for line in lines) <= 90
    assert sum("an-applicat" in line and "…" in line for line in lines) == 1
    assert "partition-l" not in out.getvalue() and "leader x3" in out.getvalue()


def test_produce_says_what_it_wrote_plainly() -> None:
    """Issue 40: "5000 records acknowledged by clicks" read oddly."""
    from kaflite.cli.produce import written

    assert written(5000, "clicks", "all") == "5000 records written to clicks, all acknowledged"
    assert written(1, "bars", "1") == "1 record written to bars, acknowledged"
    assert written(3, "t", "0") == "3 records sent to t (acks=0: the brokers confirm none)"
