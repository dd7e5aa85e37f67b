"""The command line's errors: one line and a hint, exit codes a script can test (as kcat's)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1) as c:
        yield c


def kaflite(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kaflite.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", [
    ["topics", "list"], ["topics", "describe", "t"], ["produce", "-t", "t"],
    ["consume", "-t", "t", "-e"], ["groups", "list"]])
def test_an_unreachable_cluster_is_one_line_and_exit_1(command: list[str]) -> None:
    proc = kaflite(*command, "-b", f"127.0.0.1:{_closed_port()}", stdin="x\n")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("kaflite: cannot reach the cluster"), proc.stderr
    assert lines[1].startswith("hint: ") and "kaflite up" in lines[1]
    assert len(lines) == 2 and "Traceback" not in proc.stderr


def test_an_unknown_topic_is_an_error_and_is_not_created(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    for command in (["consume", "-t", "nosuch", "-e"], ["consume", "-t", "nosuch", "-G", "g"],
                    ["produce", "-t", "nosuch"]):
        proc = kaflite(*command, "-b", b, stdin="a\n")
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith("kaflite: Unknown topic or partition: nosuch\n")
        assert "--create" in proc.stderr
    assert "nosuch" not in cluster.controller.topics
    proc = kaflite("topics", "describe", "nosuch", "-b", b)
    assert proc.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in proc.stderr
    assert "nosuch" not in cluster.controller.topics


def test_create_makes_the_topic(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    proc = kaflite("produce", "-t", "asked-for", "--create", "-b", b, stdin="a\nb\n")
    assert proc.returncode == 0, proc.stderr
    assert "asked-for" in cluster.controller.topics
    proc = kaflite("consume", "-t", "asked-for", "-e", "-b", b)
    assert proc.returncode == 0 and proc.stdout == "a\nb\n", proc.stderr


def test_help_shows_no_type_names_for_flags() -> None:
    for command in ([], ["topics", "list"], ["consume"], ["produce"], ["chaos"]):
        proc = kaflite(*command, "--help")
        assert proc.returncode == 0, proc.stderr
        assert "<bool>" not in proc.stdout, proc.stdout


def test_client_properties_with_dash_x(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    proc = kaflite("produce", "-t", "with-x", "--create", "-b", b, "-X", "linger.ms=0",
                   "-X", "compression.type=lz4", stdin="one\n")
    assert proc.returncode == 0, proc.stderr
    proc = kaflite("consume", "-t", "with-x", "-e", "-b", b, "-X", "fetch.max.wait.ms=100")
    assert proc.returncode == 0 and proc.stdout == "one\n", proc.stderr
    proc = kaflite("produce", "-t", "with-x", "-b", b, "-X", "linger.ms=soon", stdin="x\n")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("kaflite: bad client setting: ") and "linger.ms" in proc.stderr
    proc = kaflite("produce", "-t", "with-x", "-b", b, "-X", "linger.ms", stdin="x\n")
    assert proc.returncode == 2 and "name=value" in proc.stderr
