"""`kaflite up` and the pytest plugin, as users meet them."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_up(data_dir: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kaflite.cli", "up", "--brokers", "2", "--base-port", str(port),
         "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float = 30) -> str:
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
        if marker in line:
            return seen
    raise AssertionError(f"{marker!r} not printed; got:\n{seen}")


def test_kaflite_up_serves_stops_on_ctrl_c_and_keeps_its_data(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    port = free_port()
    while True:  # broker 1 takes port + 1: make sure it is free too
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            break
        except OSError:
            port = free_port()
    bootstrap = f"127.0.0.1:{port},127.0.0.1:{port + 1}"
    proc = start_up(tmp_path, port)
    try:
        out = read_until(proc, "Ctrl-C")
        assert f"bootstrap.servers={bootstrap}" in out
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(50):
            producer.produce("cli-topic", f"m{i}".encode())
        assert producer.flush(30) == 0
    finally:
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, rest
    assert "stopping" in rest
    proc = start_up(tmp_path, port)
    try:
        read_until(proc, "Ctrl-C")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("cli-topic", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 50 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
        consumer.close()
        assert got == [f"m{i}".encode() for i in range(50)]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


def test_pytest_plugin_provides_a_cluster(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from confluent_kafka.admin import AdminClient

        def test_brokers(kaflite_cluster):
            md = AdminClient({"bootstrap.servers": kaflite_cluster.bootstrap_servers}
                             ).list_topics(timeout=10)
            assert len(md.brokers) == 2
        """
    )
    result = pytester.runpytest_subprocess("--kaflite-brokers", "2", "-p", "no:cacheprovider",
                                           f"--rootdir={pytester.path}")
    result.assert_outcomes(passed=1)
